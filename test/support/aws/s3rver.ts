import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';
import type { LocalEndpoint } from './http';

/** How the S3 engine is started. */
export interface S3rverOptions {
  /** Buckets created before it answers; bucket names must be 3-63 characters, as on S3. */
  readonly buckets?: readonly string[];
  /** Where it stores objects. @default a fresh directory under os.tmpdir(), removed on close */
  readonly directory?: string;
}

/**
 * s3rver (an S3 emulator on the filesystem) on 127.0.0.1, a free port. It ignores conditional
 * headers and knows only the access key `S3RVER`, so put the S3 proxy (./s3.ts) in front of it.
 */
export async function startS3rver(options: S3rverOptions = {}): Promise<LocalEndpoint> {
  const ownDirectory = options.directory === undefined;
  const directory = options.directory ?? mkdtempSync(join(tmpdir(), 's3rver-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    configureBuckets: (options.buckets ?? []).map((name) => ({ name })),
  });
  const { port } = await server.run();
  return {
    endpoint: `http://127.0.0.1:${port}`,
    async close() {
      const closing = server.close();
      server.httpServer?.closeAllConnections();
      await closing;
      if (ownDirectory) rmSync(directory, { recursive: true, force: true });
    },
  };
}
