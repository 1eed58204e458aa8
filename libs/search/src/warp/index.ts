export {
  WARP_BITS, assertWarpBits, assertWarpCodec, warpCodeBytes, warpResiduals, fitWarpCodec, encodeWarpResiduals, encodeWarpResidualInto, warpCodeAt, decodeWarpResiduals, warpCodecChecksum,
  type WarpBits, type WarpCodec,
} from './codec';
export {
  WARP_LAYOUT_MAGIC, WARP_LAYOUT_VERSION, WARP_HEADER_BYTES, WARP_DIRECTORY_ENTRY_BYTES, WARP_U16_DOCUMENTS,
  buildWarpLayout, warpLayoutLists, warpCodeWords, warpListBytes, warpDirectoryBytes, serializeWarpLayout, parseWarpDirectory, warpListRange, readWarpList, openWarpLayout, warpListSizes,
  WarpLayoutCorruptError,
  type WarpList, type WarpListSource, type WarpLayout, type BuildWarpLayoutInput, type WarpLayoutExpectations, type WarpDirectory, type WarpLayoutReader,
} from './layout';
export {
  WARP_DEFAULT_BOUND, warpTPrime, warpTopSuffices, warpQueryTPrime, warpCentroidScores, warpTables, warpQuery, WarpWorkspace, warpScoreList, warpSegmentSearch, warpSegmentSearchSteps, warpSegmentsSearchSteps, warpSearch, warpSearchSteps,
  type WarpQueryOptions, type WarpQuery, type WarpSegment, type WarpSegmentOptions, type WarpSegmentHits, type WarpSearchOptions, type WarpSearchResult,
} from './engine';
export { benchWarp, warpBenchFixture, type WarpBenchOptions, type WarpBench, type WarpBenchFixture } from './bench';
export { warpProbedCentroids, warpCoalescedRanges, warpFetchedLists, type WarpByteRange, type WarpFetchedRange } from './ranges';
export { warpLayoutFromBytes, mergeWarpLayouts, type WarpMergePart } from './merge';
