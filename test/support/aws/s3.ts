import { randomBytes, randomUUID } from 'node:crypto';
import type { CallRecorder, DescribedCall } from './calls';
import type { InterceptContext, ProxiedRequest, ProxyReply, RecordingProxy } from './proxy';
import { startRecordingProxy } from './proxy';
import { xml, xmlDocument } from './xml';

/** Where a path-style request points: `/<bucket>/<key>`. */
interface S3Address {
  readonly bucket?: string;
  readonly key?: string;
}

/** A percent-decoded path segment; a malformed escape is kept as sent (S3 would answer 400). */
function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function addressOf(url: URL): S3Address {
  const path = url.pathname.replace(/^\//, '');
  if (path === '') return {};
  const slash = path.indexOf('/');
  if (slash < 0) return { bucket: decodeURIComponent(path) };
  const key = path.slice(slash + 1);
  return {
    bucket: decodeURIComponent(path.slice(0, slash)),
    ...(key ? { key: decodeURIComponent(key) } : {}),
  };
}

const bucketArn = (bucket: string) => `arn:aws:s3:::${bucket}`;
const objectArn = (bucket: string, key: string) => `arn:aws:s3:::${bucket}/${key}`;

// The first subresource a request carries picks its action (the SDK sends exactly one).
type ActionTable = Readonly<Record<string, string>>;

const bucketActions: Readonly<Record<string, ActionTable>> = {
  GET: {
    '': 's3:ListBucket',
    versions: 's3:ListBucketVersions',
    location: 's3:GetBucketLocation',
    uploads: 's3:ListBucketMultipartUploads',
    policy: 's3:GetBucketPolicy',
    tagging: 's3:GetBucketTagging',
    versioning: 's3:GetBucketVersioning',
    acl: 's3:GetBucketAcl',
    cors: 's3:GetBucketCORS',
    lifecycle: 's3:GetLifecycleConfiguration',
    notification: 's3:GetBucketNotification',
    encryption: 's3:GetEncryptionConfiguration',
    publicAccessBlock: 's3:GetBucketPublicAccessBlock',
    ownershipControls: 's3:GetBucketOwnershipControls',
  },
  HEAD: { '': 's3:ListBucket' },
  PUT: {
    '': 's3:CreateBucket',
    policy: 's3:PutBucketPolicy',
    tagging: 's3:PutBucketTagging',
    versioning: 's3:PutBucketVersioning',
    acl: 's3:PutBucketAcl',
    cors: 's3:PutBucketCORS',
    lifecycle: 's3:PutLifecycleConfiguration',
    notification: 's3:PutBucketNotification',
    encryption: 's3:PutEncryptionConfiguration',
    publicAccessBlock: 's3:PutBucketPublicAccessBlock',
    ownershipControls: 's3:PutBucketOwnershipControls',
  },
  DELETE: {
    '': 's3:DeleteBucket',
    policy: 's3:DeleteBucketPolicy',
    // Removing a configuration is authorized as writing it.
    tagging: 's3:PutBucketTagging',
    cors: 's3:PutBucketCORS',
    lifecycle: 's3:PutLifecycleConfiguration',
    encryption: 's3:PutEncryptionConfiguration',
    publicAccessBlock: 's3:PutBucketPublicAccessBlock',
  },
};

const objectActions: Readonly<Record<string, ActionTable>> = {
  GET: {
    '': 's3:GetObject',
    versionId: 's3:GetObjectVersion',
    tagging: 's3:GetObjectTagging',
    acl: 's3:GetObjectAcl',
    attributes: 's3:GetObjectAttributes',
    uploadId: 's3:ListMultipartUploadParts',
  },
  HEAD: { '': 's3:GetObject', versionId: 's3:GetObjectVersion' },
  PUT: {
    // UploadPart (partNumber + uploadId) is authorized as PutObject.
    '': 's3:PutObject',
    uploadId: 's3:PutObject',
    tagging: 's3:PutObjectTagging',
    acl: 's3:PutObjectAcl',
    retention: 's3:PutObjectRetention',
    'legal-hold': 's3:PutObjectLegalHold',
  },
  DELETE: {
    '': 's3:DeleteObject',
    versionId: 's3:DeleteObjectVersion',
    uploadId: 's3:AbortMultipartUpload',
    tagging: 's3:DeleteObjectTagging',
  },
  POST: {
    // CreateMultipartUpload and CompleteMultipartUpload are authorized as PutObject.
    uploads: 's3:PutObject',
    uploadId: 's3:PutObject',
    restore: 's3:RestoreObject',
    select: 's3:GetObject',
  },
};

/** The action for `method` with the request's subresource, `` when it names none. */
function pick(table: ActionTable | undefined, url: URL): string | undefined {
  if (!table) return undefined;
  for (const sub of Object.keys(table)) if (sub !== '' && url.searchParams.has(sub)) return table[sub];
  return table[''];
}

const xmlEntities: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

/** The `<Key>` values of a DeleteObjects body. */
function deletedKeys(body: Buffer): string[] {
  return [...body.toString('utf8').matchAll(/<Key>([\s\S]*?)<\/Key>/g)].map((m) =>
    (m[1] ?? '').replace(/&(amp|lt|gt|quot|apos);/g, (_, e: string) => xmlEntities[e] ?? ''),
  );
}

/** `x-amz-copy-source: <bucket>/<key>[?versionId=…]`, URL-encoded, as an object ARN. */
function copySourceArn(header: string): string {
  const [path = ''] = header.split('?');
  return `arn:aws:s3:::${decoded(path.replace(/^\//, ''))}`;
}

/**
 * The IAM calls of one path-style S3 request: PUT object -> s3:PutObject on
 * `arn:aws:s3:::<bucket>/<key>` (a copy also s3:GetObject on its source), GET/HEAD object ->
 * s3:GetObject, DELETE object -> s3:DeleteObject, GET/HEAD bucket -> s3:ListBucket on
 * `arn:aws:s3:::<bucket>`, PUT bucket -> s3:CreateBucket, DeleteObjects -> s3:DeleteObject per
 * key, the common subresources as their own actions. Anything else is `s3:Unrecognized`, which
 * no role grants, so a rehearsal flags it instead of passing it silently.
 */
export function describeS3Request(request: ProxiedRequest, _recorder: CallRecorder): DescribedCall[] {
  const { bucket, key } = addressOf(request.url);
  const method = request.method.toUpperCase();
  const operation = `${method} ${request.url.pathname}${request.url.search}`;
  if (!bucket) {
    return [
      { action: method === 'GET' ? 's3:ListAllMyBuckets' : 's3:Unrecognized', resources: ['*'], operation },
    ];
  }
  if (!key) {
    if (method === 'POST' && request.url.searchParams.has('delete')) {
      return [
        {
          action: 's3:DeleteObject',
          resources: deletedKeys(request.body).map((k) => objectArn(bucket, k)),
          operation,
        },
      ];
    }
    const action = pick(bucketActions[method], request.url) ?? 's3:Unrecognized';
    return [{ action, resources: [bucketArn(bucket)], operation }];
  }
  const action = pick(objectActions[method], request.url) ?? 's3:Unrecognized';
  const calls: DescribedCall[] = [{ action, resources: [objectArn(bucket, key)], operation }];
  const copySource = request.headers['x-amz-copy-source'];
  if (method === 'PUT' && typeof copySource === 'string') {
    calls.push({ action: 's3:GetObject', resources: [copySourceArn(copySource)], operation });
  }
  return calls;
}

/** S3's answer to a conditional write whose condition failed, in its REST XML error shape. */
function preconditionFailed(): ProxyReply {
  const body = xmlDocument(
    xml('Error', [
      xml('Code', 'PreconditionFailed'),
      xml('Message', 'At least one of the pre-conditions you specified did not hold'),
      xml('Condition', 'If-None-Match'),
      xml('RequestId', randomUUID()),
      xml('HostId', randomBytes(24).toString('base64')),
    ]),
  );
  return {
    status: 412,
    headers: { 'content-type': 'application/xml', 'x-amz-request-id': randomUUID() },
    body: Buffer.from(body),
  };
}

/**
 * `If-None-Match: *` on PutObject, which s3rver ignores: HEAD the object on the backend and
 * answer 412 PreconditionFailed if it exists, else forward. Conditional writes to one key are
 * serialized here, so of two racing writers exactly one succeeds, as on S3 (which may instead
 * answer the loser 409 ConditionalRequestConflict; a 412 is the outcome callers must handle anyway).
 */
export function createConditionalWriteIntercept(): (
  request: ProxiedRequest,
  context: InterceptContext,
) => Promise<ProxyReply | undefined> {
  const locks = new Map<string, Promise<unknown>>();
  return async (request, context) => {
    const { bucket, key } = addressOf(request.url);
    const isPutObject =
      request.method.toUpperCase() === 'PUT' &&
      bucket !== undefined &&
      key !== undefined &&
      [...request.url.searchParams.keys()].every((k) => k === 'x-id') &&
      request.headers['x-amz-copy-source'] === undefined;
    if (!isPutObject || request.headers['if-none-match'] !== '*') return undefined;
    const lockKey = `${bucket}/${key}`;
    const previous = locks.get(lockKey) ?? Promise.resolve();
    const run = previous.then(async () => {
      const head = await fetch(new URL(request.url.pathname, context.backend), { method: 'HEAD' });
      if (head.ok) return preconditionFailed();
      return context.forward();
    });
    const settled = run.catch(() => undefined);
    locks.set(lockKey, settled);
    try {
      return await run;
    } finally {
      if (locks.get(lockKey) === settled) locks.delete(lockKey);
    }
  };
}

/** How the S3 proxy is set up. */
export interface S3ProxyOptions {
  /** The S3 engine, e.g. s3rver's `http://127.0.0.1:<port>` (see ./s3rver.ts). */
  readonly backend: string;
  readonly recorder: CallRecorder;
  /**
   * Drop `Authorization` on the way to the backend: s3rver only knows the access key `S3RVER`,
   * while every rehearsal function signs with its own.
   * @default true
   */
  readonly stripAuthorization?: boolean;
}

/**
 * A recording proxy in front of an S3 engine, enforcing `If-None-Match: *` on PutObject. Clients
 * must address it path-style: the SDK does so by itself for an IP endpoint like 127.0.0.1
 * (`forcePathStyle: true` is needed only for a host name such as localhost).
 */
export function startS3Proxy(options: S3ProxyOptions): Promise<RecordingProxy> {
  return startRecordingProxy({
    service: 's3',
    backend: options.backend,
    recorder: options.recorder,
    describe: describeS3Request,
    intercept: createConditionalWriteIntercept(),
    stripAuthorization: options.stripAuthorization ?? true,
  });
}
