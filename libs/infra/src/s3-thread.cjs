// Entry of the embedded S3 server's thread (./s3-thread.ts starts it): a worker thread does not
// inherit the TypeScript loader of the process that started it, so it registers tsx itself.
require('tsx/cjs');
require('./s3-thread-main.ts');
