// Every error cusim raises carries a machine-readable `code`.
export type CusimErrorCode =
  | 'CUSIM_INVALID_ARGUMENT'
  | 'CUSIM_CUDA_ERROR'
  | 'CUSIM_OUT_OF_MEMORY'
  | 'CUSIM_DISPOSED'
  | 'CUSIM_INTERNAL'
  | 'CUSIM_ADDON_NOT_FOUND'
  | 'CUSIM_ADDON_LOAD_FAILED'
  /** A saved file that is truncated, corrupted, foreign, or of another engine or format version. */
  | 'CUSIM_BAD_FILE'
  /** The operating system refused a file operation (the message names the errno). */
  | 'CUSIM_IO_ERROR'
  /** A storage service (Redis) failed or holds data this index cannot use. */
  | 'CUSIM_STORAGE_ERROR'
  | 'ABORT_ERR';

export type CodedError = Error & {
  code: CusimErrorCode;
  /** CUSIM_OUT_OF_MEMORY: the bytes the failed allocation asked for, and those free then (where known). */
  bytesRequested?: number;
  bytesFree?: number;
};

function coded<E extends Error>(err: E, code: CusimErrorCode): E & { code: CusimErrorCode } {
  (err as E & { code: CusimErrorCode }).code = code;
  return err as E & { code: CusimErrorCode };
}

export function typeError(message: string): TypeError & { code: CusimErrorCode } {
  return coded(new TypeError(message), 'CUSIM_INVALID_ARGUMENT');
}

export function rangeError(message: string): RangeError & { code: CusimErrorCode } {
  return coded(new RangeError(message), 'CUSIM_INVALID_ARGUMENT');
}

export function cudaError(message: string): CodedError {
  return coded(new Error(message), 'CUSIM_CUDA_ERROR');
}

export function disposedError(what: string): CodedError {
  return coded(new Error(`${what} has been disposed`), 'CUSIM_DISPOSED');
}

export function abortError(reason?: unknown): CodedError {
  const err = coded(new Error('The operation was aborted', { cause: reason }), 'ABORT_ERR');
  err.name = 'AbortError';
  return err;
}

export function codedError(message: string, code: CusimErrorCode, options?: ErrorOptions): CodedError {
  return coded(new Error(message, options), code);
}
