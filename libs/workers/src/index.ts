export { HANDLED_QUEUES, pipelineHandlers } from './handlers';
export { startWorkers, runWorkerApp, workersReady } from './start';
export { reconcile, startReconciler, type ReconcileReport } from './reconciler';
