import type { IncomingHttpHeaders } from 'node:http';

/** The caller recorded for a request that carries no SigV4 credential. */
export const anonymousCaller = 'anonymous';

/** What a describer says one request asks IAM for: one action on the resources it addresses. */
export interface DescribedCall {
  /** The IAM action, e.g. `dynamodb:PutItem`. */
  readonly action: string;
  /** The ARNs the action addresses; `*` when the action takes no resource. */
  readonly resources: readonly string[];
  /** The API operation the request was (`TransactWriteItems` for its per-item actions). */
  readonly operation?: string;
  /**
   * The items a DynamoDB request names by key: the table's ARN and the top-level string (and
   * number) attributes of the item's `Key`, or of a PutItem's `Item`. The table's partition key
   * value among them is the request's `dynamodb:LeadingKeys`, which a rehearsal checks against
   * the caller's conditions.
   */
  readonly keyedItems?: readonly KeyedItem[];
  /**
   * Condition keys the request sets itself, with their values (PutEvents: `events:source`, each
   * entry's Source), for a rehearsal to judge policies' conditions on.
   */
  readonly context?: Readonly<Record<string, readonly string[]>>;
}

/** One item a DynamoDB request names: its table and its scalar key (or item) attributes. */
export interface KeyedItem {
  readonly resource: string;
  readonly attributes: Readonly<Record<string, string>>;
}

/** One IAM-relevant call, as the deploy rehearsal checks it against the caller's role. */
export interface RecordedCall extends DescribedCall {
  /** The access key id the request was signed with, or {@link anonymousCaller}. */
  readonly caller: string;
  /** The stand-in that received it (`dynamodb`, `s3`, `sns`, ...). */
  readonly service: string;
  readonly at: Date;
}

/** Where ARNs live: the stand-ins play one account in one region. */
export interface CallRecorderOptions {
  /** @default 'us-east-1' */
  readonly region?: string;
  /** @default '123456789012' */
  readonly accountId?: string;
  /** @default () => new Date() */
  readonly now?: () => Date;
}

/**
 * Every call the stand-ins received, in arrival order. A call is recorded when its request
 * arrives, before it is served: a call that fails still needed the permission to be attempted.
 */
export class CallRecorder {
  readonly region: string;
  readonly accountId: string;
  private readonly now: () => Date;
  private readonly recorded: RecordedCall[] = [];

  constructor(options: CallRecorderOptions = {}) {
    this.region = options.region ?? 'us-east-1';
    this.accountId = options.accountId ?? '123456789012';
    this.now = options.now ?? (() => new Date());
  }

  /** Records each described call of one request, all with the same caller and time. */
  record(caller: string, service: string, described: readonly DescribedCall[]): void {
    const at = this.now();
    for (const call of described) this.recorded.push({ caller, service, at, ...call });
  }

  /** The calls so far (a copy), optionally only those of one caller. */
  calls(caller?: string): RecordedCall[] {
    return this.recorded.filter((c) => caller === undefined || c.caller === caller);
  }

  /** Forgets every call, e.g. between rehearsal steps. */
  clear(): void {
    this.recorded.length = 0;
  }

  /** `arn:aws:<service>:<region>:<account>:<resource>` in this recorder's region and account. */
  arn(service: string, resource: string): string {
    return `arn:aws:${service}:${this.region}:${this.accountId}:${resource}`;
  }
}

/** The parts of a SigV4 `Authorization` header (or presigned query) the rehearsal reads. */
export interface SigV4Credential {
  readonly accessKeyId: string;
  /** `YYYYMMDD` of the credential scope. */
  readonly date: string;
  readonly region: string;
  /** The signing name, which is not always the IAM prefix (CloudWatch signs as `monitoring`). */
  readonly service: string;
  readonly signedHeaders: readonly string[];
  readonly signature: string;
}

// Credential=<AKID>/<date>/<region>/<service>/aws4_request; the AKID itself has no '/'.
const credentialScope = /^([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request$/;

function parseScope(scope: string, signedHeaders: string, signature: string): SigV4Credential | undefined {
  const m = credentialScope.exec(scope.trim());
  if (!m?.[1] || !m[2] || !m[3] || !m[4]) return undefined;
  return {
    accessKeyId: m[1],
    date: m[2],
    region: m[3],
    service: m[4],
    signedHeaders: signedHeaders ? signedHeaders.split(';') : [],
    signature,
  };
}

/**
 * Parses `AWS4-HMAC-SHA256 Credential=<AKID>/<date>/<region>/<service>/aws4_request,
 * SignedHeaders=a;b, Signature=<hex>`; undefined for anything else (absent, SigV2, malformed).
 * The signature is not verified: the stand-ins trust the caller's claim, as the rehearsal only
 * needs to know which function made the call.
 */
export function parseSigV4Authorization(header: string | undefined): SigV4Credential | undefined {
  if (!header?.startsWith('AWS4-HMAC-SHA256 ')) return undefined;
  const fields = new Map<string, string>();
  for (const part of header.slice('AWS4-HMAC-SHA256 '.length).split(',')) {
    const eq = part.indexOf('=');
    if (eq > 0) fields.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  const scope = fields.get('Credential');
  if (!scope) return undefined;
  return parseScope(scope, fields.get('SignedHeaders') ?? '', fields.get('Signature') ?? '');
}

/**
 * The access key id a request was signed with: from the `Authorization` header, else from a
 * presigned URL's `X-Amz-Credential`, else {@link anonymousCaller}.
 */
export function callerOf(headers: IncomingHttpHeaders, url?: URL): string {
  const fromHeader = parseSigV4Authorization(headers.authorization);
  if (fromHeader) return fromHeader.accessKeyId;
  const presigned = url?.searchParams.get('X-Amz-Credential');
  if (presigned) {
    const fromQuery = parseScope(
      presigned,
      url?.searchParams.get('X-Amz-SignedHeaders') ?? '',
      url?.searchParams.get('X-Amz-Signature') ?? '',
    );
    if (fromQuery) return fromQuery.accessKeyId;
  }
  return anonymousCaller;
}
