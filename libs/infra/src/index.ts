export * from './logger';
export * from './embedded-services';
export * from './object-store';
export * from './queues';
export * from './collection.repository';
export * from './process';
