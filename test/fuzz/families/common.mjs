// Scenarios shared by the families: one call on valid inputs, made in one of
// the ways a caller can make it (plain, SharedArrayBuffer-backed or offset
// arrays, arrays transferred / rewritten / freed by a dying worker mid-call,
// concurrent calls on one object, aborts before and during, dispose before
// and during), judged against a reference result.
import { SPOILERS, diff, variant } from '../gen.mjs';

export const SCENARIOS = [
  'plain',
  'variant',
  'transfer',
  'rewrite',
  'worker',
  'concurrent',
  'abort-before',
  'abort-during',
  'dispose-before',
  'dispose-during',
];

/**
 * spec:
 *  inputs(): fresh { args, views } (views: the arrays the call reads)
 *  remake(args, fn): args with each typed array passed through fn (for 'variant')
 *  call(obj, args, signal?): the call's Promise
 *  want: the reference result (or a function of args for 'concurrent': want(i))
 *  normalize(result): what is compared
 *  obj: the object called (for dispose scenarios; omit for free functions)
 *  abortable: whether the call takes a signal
 *  alt(): other valid inputs for 'concurrent', { args, want }
 */
export function scenarioCase(g, ctx, spec, scenario = g.pick(SCENARIOS)) {
  const norm = spec.normalize ?? ((r) => r);
  const expect = (want) => (r) => diff(norm(r), want);
  if ((scenario === 'abort-before' || scenario === 'abort-during') && !spec.abortable) scenario = 'plain';
  if ((scenario === 'dispose-before' || scenario === 'dispose-during') && !spec.obj) scenario = 'variant';
  const base = { entry: spec.entry, what: scenario };
  switch (scenario) {
    case 'plain': {
      const { args } = spec.inputs();
      return { ...base, kind: 'valid', run: () => spec.call(spec.obj, args), check: expect(spec.want) };
    }
    case 'variant': {
      const { args } = spec.inputs();
      const v = spec.remake(args, (a) => variant(g, a).view);
      return { ...base, kind: 'valid', run: () => spec.call(spec.obj, v), check: expect(spec.want) };
    }
    case 'transfer':
    case 'rewrite':
    case 'worker': {
      const { args, views } = spec.inputs();
      return {
        ...base,
        kind: 'valid',
        run: async () => {
          const p = spec.call(spec.obj, args);
          p.catch(() => {});
          if (scenario === 'worker') {
            const w = ctx.sink();
            const bufs = [...new Set(views.map((v) => v.buffer))].filter((b) => !(b instanceof SharedArrayBuffer));
            w.postMessage(bufs, bufs);
            await w.terminate();
          } else {
            SPOILERS[scenario](views, g);
          }
          return p;
        },
        check: expect(spec.want),
      };
    }
    case 'concurrent': {
      const others = [spec.alt ? spec.alt() : { args: spec.inputs().args, want: spec.want }, { args: spec.inputs().args, want: spec.want }];
      const { args } = spec.inputs();
      return {
        ...base,
        kind: 'valid',
        run: () => Promise.all([spec.call(spec.obj, args), ...others.map((o) => spec.call(spec.obj, o.args))]),
        check: (rs) =>
          diff(norm(rs[0]), spec.want, 'call 0') ??
          others.map((o, i) => diff(norm(rs[i + 1]), o.want, `call ${i + 1}`)).find((d) => d) ??
          null,
      };
    }
    case 'abort-before': {
      const { args } = spec.inputs();
      const ac = new AbortController();
      ac.abort(new Error('stop'));
      return { ...base, kind: 'invalid', errorCode: 'ABORT_ERR', run: () => spec.call(spec.obj, args, ac.signal) };
    }
    case 'abort-during': {
      const { args } = spec.inputs();
      const ac = new AbortController();
      const delay = g.int(3);
      return {
        ...base,
        kind: 'valid',
        allow: ['ABORT_ERR'],
        run: async () => {
          const p = spec.call(spec.obj, args, ac.signal);
          p.catch(() => {});
          if (delay === 0) ac.abort();
          else if (delay === 1) await ctx.tick().then(() => ac.abort());
          else setTimeout(() => ac.abort(), 1);
          return p;
        },
        check: expect(spec.want),
      };
    }
    case 'dispose-before': {
      const { args } = spec.inputs();
      return { ...base, kind: 'invalid', errorCode: 'CUSIM_DISPOSED', run: async () => (spec.obj.dispose(), spec.call(spec.obj, args)) };
    }
    case 'dispose-during': {
      const { args } = spec.inputs();
      return {
        ...base,
        kind: 'valid',
        allow: ['CUSIM_DISPOSED'],
        run: async () => {
          const p = spec.call(spec.obj, args);
          p.catch(() => {});
          spec.obj.dispose();
          return p;
        },
        check: expect(spec.want),
      };
    }
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

/** options with up to `n` of its fields replaced by hostile values (or deleted, or extra). */
export function spoilOptions(g, options, n = 1 + g.int(2)) {
  if (g.bool(0.08)) return g.badValue();
  const o = { ...options };
  const keys = Object.keys(o);
  for (let i = 0; i < n && keys.length; i++) {
    const k = g.pick(keys);
    const u = g.int(10);
    if (u < 6) o[k] = g.badNumberOrValue();
    else if (u < 8) delete o[k];
    else o[k] = g.badValue();
  }
  return o;
}

/** A getter-laden copy of `obj`: reading `key` runs `effect` first (detaching arrays, say). */
export function withGetter(obj, key, effect) {
  const o = { ...obj };
  const v = o[key];
  delete o[key];
  Object.defineProperty(o, key, { enumerable: true, get: () => (effect(), v) });
  return o;
}
