export { TextFeaturizer } from './featurizer.js';
export type { TextFeaturizerOptions, TextFeaturizerJSON, TextMode, Weighting } from './featurizer.js';
export type { HashedRows, TokenBatch } from './batch.js';
export { Vocabulary, HashedVocabulary, hashToken } from './vocabulary.js';
export { codeTokens, wordTokens, qgramTokens, splitIdentifier, CODE_KEYWORDS, ENGLISH_STOP_WORDS } from './tokenize.js';
