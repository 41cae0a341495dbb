import {
  ConditionalCheckFailedException,
  ProvisionedThroughputExceededException,
} from '@aws-sdk/client-dynamodb';
import { S3ServiceException } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { InjectedFaultError } from '../../infra/local/faults';
import { translateDataApiError } from '../../shared/db/data-api-client';
import { translatePgError } from '../../shared/db/pg-client';
import { PipelineError } from '../../shared/errors';
import { InboxError } from '../../shared/inbox/errors';
import { failureKind, TransientError } from '../../shared/inbox/failure-kind';

const sdkError = (name: string, status: number, extra: Record<string, unknown> = {}) =>
  Object.assign(new Error(`${name} from AWS`), { name, $metadata: { httpStatusCode: status }, ...extra });

const wrapped = (cause: unknown) => new Error('content index write of task t v2 failed', { cause });

/** An error as Node's fs raises it: `code`, a negative `errno`, the `syscall` and the path. */
const systemError = (code: string, syscall = 'open') =>
  Object.assign(new Error(`${code}: failed, ${syscall} '/data/effects/notifications.jsonl'`), {
    code,
    errno: -5,
    syscall,
    path: '/data/effects/notifications.jsonl',
  });

/** I/O failures that pass once the disk, the mount or the process's descriptors are back. */
const transientIoCodes = [
  'ENOSPC',
  'EDQUOT',
  'EROFS',
  'EIO',
  'EMFILE',
  'ENFILE',
  'EAGAIN',
  'EWOULDBLOCK',
  'EBUSY',
  'EINTR',
  'ENOMEM',
  'ENOBUFS',
  'ESTALE',
  'ETXTBSY',
  'ECONNRESET',
];

describe('failure kinds: transient is retried until the maximum event age, permanent spends a small budget', () => {
  it('throttling, 5xx, timeouts and dropped connections are transient, also wrapped by an effect', () => {
    const transient: [string, unknown][] = [
      [
        'DynamoDB throttling',
        new ProvisionedThroughputExceededException({
          message: 'Rate exceeded',
          $metadata: { httpStatusCode: 400 },
        }),
      ],
      ['SNS throttling', sdkError('Throttling', 400)],
      ['a 429', sdkError('TooManyRequests', 429)],
      [
        'an S3 503',
        new S3ServiceException({ name: 'SlowDown', $fault: 'server', $metadata: { httpStatusCode: 503 } }),
      ],
      ['a 500', sdkError('InternalServerError', 500)],
      ['a socket timeout', Object.assign(new Error('socket hang up'), { name: 'TimeoutError' })],
      ['a reset connection', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })],
      ['a refused connection', Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })],
      ['DNS for now', Object.assign(new Error('getaddrinfo EAI_AGAIN'), { code: 'EAI_AGAIN' })],
      ['undici', Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' })],
      ...transientIoCodes.map((code): [string, unknown] => [`a file system's ${code}`, systemError(code)]),
      ['the local fault injection', new InjectedFaultError('injected fault: effectFailBefore')],
      ['one that says so', new TransientError('the archive bucket is being created')],
      ['PostgreSQL restarting', translatePgError(Object.assign(new Error('terminating'), { code: '57P01' }))],
      ['a deadlock', translatePgError(Object.assign(new Error('deadlock detected'), { code: '40P01' }))],
      ['a dropped PostgreSQL connection', translatePgError(new Error('Connection terminated unexpectedly'))],
      ['Aurora resuming', translateDataApiError(sdkError('DatabaseResumingException', 400))],
      ['a Data API 503', translateDataApiError(sdkError('ServiceUnavailableError', 503))],
      ['a Data API statement timeout', translateDataApiError(sdkError('StatementTimeoutException', 400))],
      [
        'a store error of the inbox',
        new InboxError(
          'STORE_ERROR',
          'inbox get failed',
          {},
          { cause: sdkError('InternalServerError', 500) },
        ),
      ],
    ];
    for (const [what, err] of transient) {
      expect(failureKind(err), what).toBe('transient');
      expect(failureKind(wrapped(err)), `${what}, wrapped`).toBe('transient');
    }
  });

  it('validation, other 4xx, bugs and unknown errors are permanent', () => {
    const permanent: [string, unknown][] = [
      ['a validation error', sdkError('ValidationException', 400)],
      ['access denied', sdkError('AccessDeniedException', 400)],
      ['a missing bucket', sdkError('NoSuchBucket', 404)],
      [
        'a refused condition',
        new ConditionalCheckFailedException({ message: 'no', $metadata: { httpStatusCode: 400 } }),
      ],
      ['a constraint', translatePgError(Object.assign(new Error('duplicate key'), { code: '23505' }))],
      ['a bad statement', translatePgError(Object.assign(new Error('syntax error'), { code: '42601' }))],
      [
        'a wrong password',
        translatePgError(Object.assign(new Error('password authentication failed'), { code: '28P01' })),
      ],
      ['a task that is not there', new PipelineError('NOT_FOUND', 'no task t')],
      ['a Data API bad request', translateDataApiError(sdkError('BadRequestException', 400))],
      ['a schema violation', z.object({ a: z.string() }).safeParse({}).error],
      ['a missing file', systemError('ENOENT')],
      ['a file system refusing the user', systemError('EACCES')],
      ['a path that is a directory', systemError('EISDIR')],
      ['a bug', new TypeError("Cannot read properties of undefined (reading 'x')")],
      ['an unknown error', new Error('something odd')],
      ['not even an Error', 'a string'],
      ['nothing', undefined],
    ];
    for (const [what, err] of permanent) {
      expect(failureKind(err), what).toBe('permanent');
      expect(failureKind(wrapped(err)), `${what}, wrapped`).toBe('permanent');
    }
  });

  it('a cause chain that loops ends, and is permanent', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(failureKind(a)).toBe('permanent');
  });
});
