/**
 * The progress a train job reports (BullMQ job progress; `GET /v1/train/{id}` shows it), for every
 * head: its stage, where training is (epoch and step of how many), the training loss of the epoch
 * so far, the time left, and the learning curve.
 */
export interface TrainJobProgressOf<Stage extends string, Curve> {
  percent: number;
  stage: Stage;
  epoch?: number;
  maxEpochs?: number;
  step?: number;
  stepsPerEpoch?: number;
  /** training loss of the epoch so far (AESI: its MSE) */
  loss?: number;
  etaSeconds?: number;
  curve?: Curve;
}
