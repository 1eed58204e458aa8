export { initTf, rng, shuffled, tf, type TfBackend } from './tf';
export { LiteTf, KnrmTf, knrmPhiTf, padRowsTo, type LiteSizes } from './heads';
export {
  trainHead, scoreWithWeights, splitQueries, assembleTrainingQuery, ndcg10, MIN_TRAIN_QUERIES, TrainingDivergedError, TooFewQueriesError,
  type TokenSource, type TrainingQuery, type TrainOptions, type TrainProgress, type EpochProgress, type TrainResult, type EpochRecord, type HeadKind,
} from './trainer';
export { synthetic } from './synthetic';
export { AesiTf, trainAesi, geluTf, foldAesiNormalisation, centreAndScale, type AesiNormalisation, type AesiSizes, type AesiExport, type AesiTrainOptions, type AesiTrainResult, type AesiEpoch, type AesiProgress } from './aesi';
export { trainHeadInThread, trainAesiInThread } from './thread';
