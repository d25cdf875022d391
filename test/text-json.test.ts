// Saved TextFeaturizer JSON: damaged or inconsistent copies give coded
// errors, never a featurizer that silently differs from the one saved.
import { describe, expect, it } from 'vitest';
import { TextFeaturizer } from '../lib/index.js';
import { expectInvalid, randInt, rng } from './helpers.js';

const docs = ['red green blue', 'green blue', 'blue blue red', 'violet', 'red red red green'];

function saved(hashBits?: number): string {
  const f = new TextFeaturizer({ mode: 'words', weighting: 'tfidf', ...(hashBits ? { hashBits } : {}) });
  f.transform(docs);
  return JSON.stringify(f.toJSON());
}

describe('TextFeaturizer JSON', () => {
  it('round trips exactly, from the string or the parsed object', () => {
    for (const bits of [undefined, 8]) {
      const s = saved(bits);
      expect(JSON.stringify(TextFeaturizer.fromJSON(s).toJSON())).toBe(s);
      expect(JSON.stringify(TextFeaturizer.fromJSON(JSON.parse(s)).toJSON())).toBe(s);
    }
  });

  it('random truncations and character changes give coded errors or the identical featurizer', () => {
    const r = rng(13);
    for (const bits of [undefined, 4]) {
      const s = saved(bits);
      let errors = 0;
      for (let i = 0; i < 400; i++) {
        let t: string;
        if (i < 100) t = s.slice(0, randInt(r, s.length));
        else {
          const at = randInt(r, s.length);
          t = s.slice(0, at) + String.fromCharCode(32 + randInt(r, 95)) + s.slice(at + 1);
        }
        let f: TextFeaturizer | undefined;
        try {
          f = TextFeaturizer.fromJSON(t);
        } catch (e) {
          expect(e, String(e)).toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
          errors++;
        }
        if (f) expect(JSON.stringify(f.toJSON())).toBe(s);
      }
      expect(errors).toBeGreaterThan(350);
    }
  });

  it('without a checksum, inconsistent fields and impossible statistics are still refused', () => {
    const base = () => {
      const j = JSON.parse(saved()) as Record<string, unknown> & { vocabulary: Record<string, unknown> };
      delete j.checksum;
      return j;
    };
    expect(TextFeaturizer.fromJSON(base()).vocabulary.documents).toBe(5);
    expectInvalid(() => TextFeaturizer.fromJSON('{"format": "cusim.text/1",'), Error, /not valid JSON/);
    expectInvalid(() => TextFeaturizer.fromJSON({ ...base(), extra: 1 }), Error, /json.extra is not a field/);
    expectInvalid(() => TextFeaturizer.fromJSON({ ...base(), native: true }), Error, /json.native is not a field/);
    const noMode = base();
    delete noMode.mode;
    expectInvalid(() => TextFeaturizer.fromJSON(noMode), Error, /json.mode is missing/);
    expectInvalid(() => TextFeaturizer.fromJSON({ ...base(), frozen: 'yes' }), Error, /frozen must be a boolean/);
    expectInvalid(() => TextFeaturizer.fromJSON({ ...base(), hashBits: 8 }), Error, /kind must be 'hashed'/);
    const df = base();
    (df.vocabulary.df as number[])[0] = 6;
    expectInvalid(() => TextFeaturizer.fromJSON(df), Error, /df\[0\] must be an integer in \[0, 5\]/);
    const noDf = base();
    delete noDf.vocabulary.df;
    expectInvalid(() => TextFeaturizer.fromJSON(noDf), Error, /one entry per term/);
    const dup = base();
    (dup.vocabulary.terms as string[])[1] = (dup.vocabulary.terms as string[])[0];
    expectInvalid(() => TextFeaturizer.fromJSON(dup), Error, /listed twice/);
    const h = JSON.parse(saved(6)) as Record<string, unknown> & { vocabulary: { df: [number, number][] } };
    delete h.checksum;
    h.vocabulary.df = [h.vocabulary.df[1], h.vocabulary.df[0], ...h.vocabulary.df.slice(2)];
    expectInvalid(() => TextFeaturizer.fromJSON(h), Error, /df\[1\]\[0\] must be an integer/);
    const alt = JSON.parse(saved()) as Record<string, unknown>;
    alt.weighting = 'count';
    expectInvalid(() => TextFeaturizer.fromJSON(alt), Error, /checksum does not match/);
  });
});
