export { HANDLED_QUEUES, pipelineHandlers } from './handlers';
export { startWorkers, runWorkerApp } from './start';
export { reconcile, startReconciler, type ReconcileReport } from './reconciler';
