// Saved TextFeaturizer JSON: damaged or inconsistent copies give coded
// errors, never a featurizer that silently differs from the one saved.
import { describe, expect, it } from 'vitest';
import { TextFeaturizer } from '../lib/index.js';
import { randInt, rng } from './helpers.js';

const docs = ['red green blue', 'green blue', 'blue blue red', 'violet', 'red red red green'];

function saved(hashBits?: number): string {
  const f = new TextFeaturizer({ mode: 'words', weighting: 'tfidf', ...(hashBits ? { hashBits } : {}) });
  f.transform(docs);
  return JSON.stringify(f.toJSON());
}

const coded = (fn: () => unknown) => {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(Error);
  expect(err).toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
  return err as Error;
};

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
    expect(coded(() => TextFeaturizer.fromJSON('{"format": "cusim.text/1",')).message).toMatch(/not valid JSON/);
    expect(coded(() => TextFeaturizer.fromJSON({ ...base(), extra: 1 })).message).toMatch(/json.extra is not a field/);
    expect(coded(() => TextFeaturizer.fromJSON({ ...base(), native: true })).message).toMatch(/json.native is not a field/);
    const noMode = base();
    delete noMode.mode;
    expect(coded(() => TextFeaturizer.fromJSON(noMode)).message).toMatch(/json.mode is missing/);
    expect(coded(() => TextFeaturizer.fromJSON({ ...base(), frozen: 'yes' })).message).toMatch(/frozen must be a boolean/);
    expect(coded(() => TextFeaturizer.fromJSON({ ...base(), hashBits: 8 })).message).toMatch(/kind must be 'hashed'/);
    const df = base();
    (df.vocabulary.df as number[])[0] = 6;
    expect(coded(() => TextFeaturizer.fromJSON(df)).message).toMatch(/df\[0\] must be an integer in \[0, 5\]/);
    const noDf = base();
    delete noDf.vocabulary.df;
    expect(coded(() => TextFeaturizer.fromJSON(noDf)).message).toMatch(/one entry per term/);
    const dup = base();
    (dup.vocabulary.terms as string[])[1] = (dup.vocabulary.terms as string[])[0];
    expect(coded(() => TextFeaturizer.fromJSON(dup)).message).toMatch(/listed twice/);
    const h = JSON.parse(saved(6)) as Record<string, unknown> & { vocabulary: { df: [number, number][] } };
    delete h.checksum;
    h.vocabulary.df = [h.vocabulary.df[1], h.vocabulary.df[0], ...h.vocabulary.df.slice(2)];
    expect(coded(() => TextFeaturizer.fromJSON(h)).message).toMatch(/df\[1\]\[0\] must be an integer/);
    const alt = JSON.parse(saved()) as Record<string, unknown>;
    alt.weighting = 'count';
    expect(coded(() => TextFeaturizer.fromJSON(alt)).message).toMatch(/checksum does not match/);
  });
});
