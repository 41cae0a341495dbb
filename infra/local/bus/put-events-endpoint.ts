import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { routeEvent } from '../../../shared/events/event-routing';
import type { RuleSpec } from '../../../shared/topology';
import type { FaultInjector } from '../faults';
import { answerClientErrorsAsJson, BodyTooLargeError, readBody, sendAndClose } from '../http-guard';
import { localRegion } from '../local-credentials';
import {
  createSigV4Verifier,
  type LocalAwsCredentials,
  type SignedRequest,
  type SigV4Refusal,
  type SigV4Verdict,
} from '../sigv4-verifier.mjs';
import type { BusCounters, TargetDelivery } from './bus-types';
import type { JournalledEvent } from './journal';
import {
  type EntryError,
  entryBytes,
  entryError,
  type PutEventsEntry,
  putEventsRequest,
  serializationMessage,
  toBusEvent,
} from './put-events-request';

/** What an answered PutEvents call hands on: the events to journal, then the deliveries to start. */
export interface AcceptedBatch {
  /** Accepted events that have targets; journalled (fsync) before the answer goes out. */
  readonly events: readonly JournalledEvent[];
  /** One per (event, target), twice when the busDuplicate fault strikes. */
  readonly deliveries: readonly TargetDelivery[];
}

export interface PutEventsEndpointOptions {
  readonly busName: string;
  /** The bus's rules as they are now: enabled ones only, as changed by hand (LocalBus). */
  readonly rules: () => readonly RuleSpec[];
  /** The entries' total size limit of one request, in bytes (EventBridge's entry size rule). */
  readonly maxRequestBytes: number;
  readonly faults: FaultInjector;
  readonly counters: BusCounters;
  /** Epoch ms a delivery's first attempt is dated from. */
  readonly clock: () => number;
  /**
   * Called once per request before the answer is sent: it must make `events` durable before it
   * resolves, since each accepted entry's EventId promises its delivery (a rejection answers
   * the call with a 500 InternalFailure, which the SDK retries).
   */
  readonly accept: (batch: AcceptedBatch) => Promise<void>;
  readonly log: (message: string, extra?: Record<string, unknown>) => void;
  /**
   * The one key pair whose SigV4 signatures the endpoint accepts (the data directory's, see
   * local-credentials.ts): an unsigned or wrongly signed request is refused before anything is
   * read from it. Without: any request is accepted, signed or not (a test's own bus).
   */
  readonly credentials?: LocalAwsCredentials;
}

/**
 * How EventBridge refuses a request it cannot authenticate: the Common Errors of its API
 * Reference (https://docs.aws.amazon.com/eventbridge/latest/APIReference/CommonErrors.html:
 * MissingAuthenticationToken 403, InvalidClientTokenId 403, IncompleteSignature 400,
 * RequestExpired 400), under the `__type` names awsJson services answer with, which the SDK reads
 * (InvalidSignatureException with "Signature expired" is one it corrects its clock on and retries).
 */
const authErrors: Record<SigV4Refusal, { readonly status: number; readonly type: string }> = {
  missing: { status: 403, type: 'MissingAuthenticationTokenException' },
  incomplete: { status: 400, type: 'IncompleteSignatureException' },
  unrecognized: { status: 403, type: 'UnrecognizedClientException' },
  invalid: { status: 403, type: 'InvalidSignatureException' },
  expired: { status: 400, type: 'InvalidSignatureException' },
};

/** An AWS JSON error body: its `__type` is also sent as `x-amzn-errortype`. */
interface AwsError {
  readonly __type: string;
  readonly message: string;
}

/**
 * The bus's `PutEvents` endpoint (awsJson1.1) on loopback, which the real
 * `@aws-sdk/client-eventbridge` client talks to. It refuses a request as a whole the way
 * EventBridge does (SerializationException, ValidationException, RequestEntityTooLarge while
 * the body still arrives), answers each entry on its own (an EventId, or its error in place),
 * and routes each accepted event through the rules' patterns to its targets.
 * https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html
 */
export class PutEventsEndpoint {
  private server: Server | undefined;
  private readonly verify: (request: SignedRequest) => Promise<SigV4Verdict>;

  constructor(private readonly options: PutEventsEndpointOptions) {
    const credentials = options.credentials;
    this.verify = credentials
      ? createSigV4Verifier({ credentials, region: localRegion, service: 'events' })
      : async () => ({ ok: true });
  }

  /** Listens on a free loopback port; returns the endpoint URL. */
  async listen(): Promise<string> {
    const server = createServer((req, res) => {
      this.handle(req, res).catch((err) =>
        this.reply(res, 500, { __type: 'InternalFailure', message: String(err) }),
      );
    });
    this.server = server;
    answerClientErrorsAsJson(server, (_status, message) => ({
      __type: 'SerializationException',
      message,
    }));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  /** Stops accepting requests and drops the connections left open. */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server?.closeAllConnections?.();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw: Buffer;
    try {
      raw = await readBody(req, this.maxBodyBytes());
    } catch (err) {
      if (!(err instanceof BodyTooLargeError)) throw err;
      return sendAndClose(
        res,
        413,
        { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-errortype': 'RequestEntityTooLarge' },
        JSON.stringify({
          __type: 'RequestEntityTooLarge',
          message: `Request body is larger than ${err.maxBytes} bytes.`,
        }),
      );
    }
    // As AWS does, before the request is looked at: who sent it.
    const verdict = await this.verify({
      method: req.method ?? 'GET',
      url: req.url ?? '/',
      headers: req.headers,
      body: raw,
    });
    if (!verdict.ok) {
      const { status, type } = authErrors[verdict.reason];
      return this.reply(res, status, { __type: type, message: verdict.message });
    }
    const target = String(req.headers['x-amz-target'] ?? '');
    if (req.method !== 'POST' || target !== 'AWSEvents.PutEvents') {
      return this.reply(res, 400, {
        __type: 'UnknownOperationException',
        message: `unsupported: ${target || req.method}`,
      });
    }
    const entries = this.readEntries(raw);
    if ('__type' in entries) return this.reply(res, 400, entries);
    const results: (EntryError | { EventId: string })[] = [];
    const events: JournalledEvent[] = [];
    const deliveries: TargetDelivery[] = [];
    for (const entry of entries) {
      const outcome = this.route(entry);
      if ('error' in outcome) {
        results.push(outcome.error);
        continue;
      }
      const { event, targets } = outcome;
      if (this.options.faults.strikes('busReject')) {
        results.push(entryError('InternalFailure', 'injected fault: busReject'));
        continue;
      }
      if (targets.length > 0) events.push({ event, targets });
      const copies = this.options.faults.strikes('busDuplicate') ? 2 : 1;
      for (let i = 0; i < copies; i++) {
        for (const t of targets) deliveries.push({ event, ...t, firstAttemptAt: this.options.clock() });
      }
      results.push(
        this.options.faults.strikes('busAckLoss')
          ? entryError('InternalFailure', 'injected fault: busAckLoss (the event was delivered)')
          : { EventId: event.id },
      );
    }
    // Journalled (fsync) before answering: an EventId is a promise the event will be delivered.
    await this.options.accept({ events, deliveries });
    const failed = results.filter((r) => 'ErrorCode' in r).length;
    this.options.counters.accepted += results.length - failed;
    this.options.counters.rejected += failed;
    this.reply(res, 200, { FailedEntryCount: failed, Entries: results });
  }

  /** The request's entries, or the error that refuses the request as a whole. */
  private readEntries(raw: Buffer): PutEventsEntry[] | AwsError {
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      return { __type: 'SerializationException', message: 'body is not JSON' };
    }
    const request = putEventsRequest.safeParse(body);
    if (!request.success) {
      return { __type: 'SerializationException', message: serializationMessage(request.error) };
    }
    const entries = request.data.Entries;
    if (!entries) {
      return {
        __type: 'ValidationException',
        message: `1 validation error detected: Value null at 'entries' failed to satisfy constraint: Member must not be null`,
      };
    }
    if (entries.length < 1 || entries.length > 10) {
      return {
        __type: 'ValidationException',
        message: `1 validation error detected: Value at 'entries' failed to satisfy constraint: Member must have length ${entries.length < 1 ? 'greater than or equal to 1' : 'less than or equal to 10'}`,
      };
    }
    const total = entries.reduce((n, e) => n + entryBytes(e), 0);
    if (total > this.options.maxRequestBytes) {
      return {
        __type: 'ValidationException',
        message: 'Total size of the entries in the request is over the limit.',
      };
    }
    return entries;
  }

  /** The entry's event and the targets whose rule patterns match it, or the entry's error. */
  private route(entry: PutEventsEntry): { error: EntryError } | JournalledEvent {
    const outcome = toBusEvent(entry);
    if ('error' in outcome) return outcome;
    const { event } = outcome;
    const bus = typeof entry.EventBusName === 'string' ? entry.EventBusName : 'default';
    // AWS accepts an entry for a bus that does not exist and drops it; so do we, loudly.
    if (bus !== this.options.busName && !bus.endsWith(`:event-bus/${this.options.busName}`)) {
      this.options.log('entry for an unknown bus accepted and dropped, as AWS does', { bus });
      return { event, targets: [] };
    }
    return { event, targets: routeEvent(this.options.rules(), event) };
  }

  /**
   * The most body bytes a PutEvents request can need: the entries' size limit, with every
   * character escaped in the JSON (at most 6 bytes for one), and room for the envelope.
   */
  private maxBodyBytes(): number {
    return this.options.maxRequestBytes * 6 + 64 * 1024;
  }

  private reply(res: ServerResponse, status: number, body: AwsError | Record<string, unknown>): void {
    const headers: Record<string, string> = {
      'content-type': 'application/x-amz-json-1.1',
      'x-amzn-requestid': randomUUID(),
    };
    const type = (body as { __type?: string }).__type;
    if (type) headers['x-amzn-errortype'] = type;
    res.writeHead(status, headers).end(JSON.stringify(body));
  }
}
