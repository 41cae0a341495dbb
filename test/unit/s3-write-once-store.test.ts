import { PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { archiveKey } from '../../functions/consumers/archive/effect';
import { S3WriteOnceStore } from '../../shared/consumers/adapters/aws/s3-write-once-store';

const s3 = mockClient(S3Client);

const s3Error = (name: string, status: number) =>
  new S3ServiceException({ name, $fault: 'client', $metadata: { httpStatusCode: status }, message: name });

// The S3 adapter of a bucket resource, with the archive consumer's snapshot keys (archiveKey).
describe('S3 write-once store', () => {
  let archive: S3WriteOnceStore;

  beforeEach(() => {
    s3.reset();
    archive = new S3WriteOnceStore(new S3Client({ region: 'us-east-1', maxAttempts: 1 }), 'snapshots');
  });

  it('puts the snapshot write-once (If-None-Match: *) at the task/version/event key', async () => {
    s3.on(PutObjectCommand).resolves({});
    const key = archiveKey('t-1', 3, 'e-9');
    expect(key).toBe('tasks/t-1/v3/e-9.json');
    expect(await archive.put(key, '{"a":1}')).toBe('written');
    expect(s3.commandCalls(PutObjectCommand)[0]?.args[0].input).toEqual({
      Bucket: 'snapshots',
      Key: 'tasks/t-1/v3/e-9.json',
      Body: '{"a":1}',
      ContentType: 'application/json',
      IfNoneMatch: '*',
    });
  });

  it('treats 412 PreconditionFailed as already stored: idempotent', async () => {
    s3.on(PutObjectCommand).rejects(s3Error('PreconditionFailed', 412));
    expect(await archive.put('tasks/t/v1/e.json', '{}')).toBe('exists');
  });

  it('rethrows anything else with the cause, so the inbox records the failure and retries', async () => {
    const denied = s3Error('AccessDenied', 403);
    s3.on(PutObjectCommand).rejects(denied);
    const err = await archive.put('tasks/t/v1/e.json', '{}').catch((e: unknown) => e);
    expect((err as Error).message).toContain('s3://snapshots/tasks/t/v1/e.json');
    expect((err as Error).cause).toBe(denied);
    // A concurrent write to the key still in flight is not "exists": the retry decides.
    const conflict = s3Error('ConditionalRequestConflict', 409);
    s3.on(PutObjectCommand).rejects(conflict);
    const retried = await archive.put('tasks/t/v1/e.json', '{}').catch((e: unknown) => e);
    expect((retried as Error).message).toBe('put of s3://snapshots/tasks/t/v1/e.json failed');
    expect((retried as Error).cause).toBe(conflict);
  });
});
