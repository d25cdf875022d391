// Page-locked host arrays. A GPU copies to and from page-locked memory by DMA
// at full link speed, while ordinary (pageable) memory has to pass through a
// staging copy on the CPU first; for corpora of gigabytes that host copy, not
// the GPU, bounds a call, and with several GPUs it is shared by all of them.
// Arrays from pinnedArray are read and written in place by the engines that
// recognise them (WeightedMinHash inputs and `out`). Like PyTorch's
// pin_memory: allocate them once, reuse them, and keep them to what the GPUs
// stream, since page-locked memory cannot be swapped out.
import { constants } from 'node:buffer';
import { native } from './addon.js';
import { typeError } from './errors.js';
import { checkInt, describe } from './validate.js';

type TypedArrayConstructor =
  | Uint8ArrayConstructor
  | Int8ArrayConstructor
  | Uint16ArrayConstructor
  | Int16ArrayConstructor
  | Uint32ArrayConstructor
  | Int32ArrayConstructor
  | Float32ArrayConstructor
  | Float64ArrayConstructor;

const CONSTRUCTORS: readonly TypedArrayConstructor[] = [
  Uint8Array,
  Int8Array,
  Uint16Array,
  Int16Array,
  Uint32Array,
  Int32Array,
  Float32Array,
  Float64Array,
];

const pinnedBuffers = new WeakSet<ArrayBufferLike>();

/**
 * A zero-filled typed array of `length` elements in page-locked host memory when
 * a CUDA GPU is present (an ordinary array otherwise, so code runs unchanged on
 * CPU hosts). Freed when it is garbage-collected.
 */
export function pinnedArray<C extends TypedArrayConstructor>(type: C, length: number): InstanceType<C> {
  if (!CONSTRUCTORS.includes(type)) throw typeError(`type must be a typed array constructor such as Uint32Array, got ${describe(type)}`);
  // The longest typed array this runtime makes (2^32 elements on 64-bit Node 20).
  const n = checkInt(length, 'length', 0, Math.min(constants.MAX_LENGTH, Math.floor(Number.MAX_SAFE_INTEGER / type.BYTES_PER_ELEMENT)));
  const r = native().allocPinned(n * type.BYTES_PER_ELEMENT);
  if (r.pinned) pinnedBuffers.add(r.buffer);
  return new type(r.buffer, 0, n) as InstanceType<C>;
}

/** Whether `view` lies in memory allocated by pinnedArray with page-locking in effect. */
export function isPinned(view: ArrayBufferView): boolean {
  if (!ArrayBuffer.isView(view)) throw typeError(`view must be a typed array or DataView, got ${describe(view)}`);
  return pinnedBuffers.has(view.buffer);
}
