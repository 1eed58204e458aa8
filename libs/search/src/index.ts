export { concatDocPrefixes, docPrefixesOf, searchSegment, tokenOwners, type SearchSegment, type SegmentSource, type PrefixScan, type DocMask, type Hit, type HitExplain, type RowScorer, type SegmentHits } from './types';
export { TopK } from './select';
export { runSteps, DOC_SLICE, DENSE_DOC_SLICE, type Steps } from './steps';
export { kWayMerge, mergeHits, mergeIntoHits, compareRanked, hitKeys, type RankedList, type MergedPositions } from './merge';
export {
  ivfCentroidCount, sphericalKmeans, fitIvfCentroids, assignNearest, normalizeRows, distinctSample, IVF_MIN_CENTROIDS, IVF_MAX_CENTROIDS,
  type KmeansOptions, type KmeansResult, type FitIvfOptions, type Assignment, type AssignFn,
} from './kmeans';
export {
  buildSegmentIndex, buildBm25Postings, serializeSegmentIndex, deserializeSegmentIndex, centroidsChecksum, SegmentIndexCorruptError,
  SEGMENT_INDEX_MAGIC, SEGMENT_INDEX_VERSION, SEGMENT_INDEX_SECTIONS,
  type SegmentIndex, type TokenIvf, type Bm25Postings, type BuildSegmentIndexOptions, type IndexExpectations,
} from './segment-index';
export {
  BM25_K1, BM25_B, Bm25TermStats, segmentBm25Stats, serializeBm25Stats, deserializeBm25Stats, documentsBm25Stats, adjustBm25Stats, BM25_STATS_MAGIC, BM25_STATS_VERSION, sumBm25Stats, documentFrequency, bm25Query, bm25SegmentSearch, bm25Search, bm25SearchSteps,
  type Bm25Params, type Bm25Stats, type Bm25Query, type SegmentSearchOptions,
} from './bm25';
export { xtrProbe, xtrSegmentSearch, xtrSegmentSearchSteps, xtrSearch, xtrSearchSteps, scoreRows as xtrScoreRows, type XtrProbe, type XtrSegmentOptions, type XtrSearchOptions, type XtrSearchResult } from './xtr';
export { xtrMerge, xtrMergeSteps, XTR_MAX_QUERY_TOKENS, type XtrSegmentLists, type XtrMerged } from './xtr-merge';
export {
  xtrAccumulate, xtrCandidates, xtrCandidateCount, XtrWorkspace, xtrAggregateSegment, benchXtrAccumulator,
  type XtrAggregateOptions, type XtrAccumulatorBenchOptions, type XtrAccumulatorBench,
} from './xtr-aggregate';
export { XtrRunningMerge } from './xtr-running-merge';
export {
  denseSegmentSearch, denseSegmentSearchSteps, denseSearch, denseSearchSteps, mebertSegmentSearch, mebertSegmentSearchSteps, mebertSearch, mebertSearchSteps,
  type DenseOptions, type MebertOptions,
} from './dense';
export { exhaustiveSegmentSearch, exhaustiveSegmentSearchSteps, exhaustiveSearch, exhaustiveSearchSteps, type ExhaustiveOptions } from './exhaustive';
export {
  FilterSchema, FilterConditionSchema, FilterFormSchema, FilterConditionFormSchema, parseFilter, compileFilter, docMask, andMasks, valuesAt, parseIsoDate, FILTER_MAX_DEPTH,
  type Filter, type FilterCondition, type MatchValue, type RangeBound, type DocPredicate,
} from './filters';
export { xtrGlobalCut, xtrShardHits, xtrShardHitsSteps, mergeShardHits } from './shards';
/** Deterministic synthetic collections (seeded), for tests of the libraries that search segments. */
export { makeCorpus, randomUnit, unitRows, type Corpus, type CorpusOptions } from './test-utils';
export { densePass, mebertPass, exhaustivePass, bm25Pass, xtrPass, pairPass, Bm25StatsPass, XtrPass, type SegmentPass, type PassSegment } from './stream';
/** WARP (SPEC 3.5): residual codec, centroid-major segment layout, the engine over it. */
export * from './warp';
/** BM25's analysers (SPEC 3.6): the `english` analysis and its term ids. */
export { englishTerms, englishTermIds, analyzeTexts, termHash, ENGLISH_STOP_WORDS, MAX_WORD_LENGTH } from './analyzer';
export { prefixScanOf } from './prefix-scan';
export {
  buildMebertLists, buildMebertListsFromPrefix, mebertListSource, mebertProbe, mebertIvfStats, mebertIvfSegmentSearch, mebertIvfSegmentSearchSteps, mebertIvfSearch, mebertIvfSearchSteps,
  type MebertLists, type MebertListSource, type BuildMebertListsInput, type MebertIvfOptions, type MebertIvfStats,
} from './mebert-ivf';
