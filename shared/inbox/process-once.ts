import { randomUUID } from 'node:crypto';
import { backoffDelay } from '../db/retry';
import { InboxBackoffError, InboxFencedOutError, InboxInProgressError, isInboxError } from './errors';
import { type FailureKind, failureKind } from './failure-kind';
import type { ExpectedState, InboxKey, InboxRecord, InboxStore } from './inbox-store';
import type { InboxSettings } from './settings';

/** What the inbox needs to know about one delivery of an event. */
export interface InboxEvent extends InboxKey {
  readonly subject: string | null;
  readonly eventType: string;
  /** `payloadHash(cloudEvent)`: the same id with another hash is poison. */
  readonly payloadHash: string;
  /** The EventBridge event as received; stored on the record for redrive. */
  readonly event: unknown;
}

/** Handed to the work: which attempt this is, and a signal raised when the lease is lost. */
export interface WorkContext {
  readonly attempt: number;
  /** Aborted when a heartbeat finds another attempt took the record over: stop early if you can. */
  readonly signal: AbortSignal;
}

/** Where heartbeat trouble is reported; the work itself goes on. */
export interface ProcessLogger {
  warn(message: string, ...extra: unknown[]): void;
}

/** Dependencies of {@link processOnce}. */
export interface ProcessOnceDeps {
  readonly inbox: InboxStore;
  readonly settings: InboxSettings;
  /** Epoch milliseconds; defaults to `Date.now`. Every lease and backoff time comes from it. */
  readonly clock?: () => number;
  /** Epoch ms at which the invocation will be stopped (Lambda's deadline); none means no limit. */
  readonly deadline?: number;
  /** This attempt's identity; must be unique per attempt (it is the fencing token). */
  readonly owner?: string;
  readonly random?: () => number;
  readonly logger?: ProcessLogger;
}

/** How a delivery ended, when it ended without an error the platform must retry. */
export type ProcessOutcome<T> =
  /** The effect ran and the record is `PROCESSED`. */
  | { readonly kind: 'processed'; readonly attempt: number; readonly takenOver: boolean; readonly result: T }
  /** Already `PROCESSED` or `DEAD` (or the same poison already recorded): acknowledged, skipped. */
  | { readonly kind: 'duplicate'; readonly status: InboxRecord['status'] }
  /**
   * `DEAD`, acknowledged, alarmed: a permanent failure spent its budget, or transient failures
   * (or lost leases) outlasted the maximum event age.
   */
  | { readonly kind: 'dead'; readonly attempt: number; readonly reason: string }
  /** An event that can never succeed (see {@link recordPoison}): recorded `DEAD` under a poison key, never retried. */
  | { readonly kind: 'poison'; readonly reason: string; readonly poisonKey: string };

/** A delivery that can never succeed, as {@link recordPoison} records it. */
export interface PoisonEvent extends InboxEvent {
  /** The CloudEvent id it arrived under, when it has one (`eventId` may be the bus's id instead). */
  readonly cloudEventId: string | null;
  /** Why it can never succeed: the record's `lastError`. */
  readonly reason: string;
}

/** How recording a poison event ended: recorded now, or already recorded (a duplicate delivery of it). */
export type PoisonOutcome =
  | Extract<ProcessOutcome<never>, { readonly kind: 'poison' }>
  | { readonly kind: 'duplicate'; readonly status: 'DEAD' };

/** The sort key a poison record is written under: never a real record's key, stable per payload. */
export function poisonKey(eventId: string, hash: string): string {
  return `${eventId}#poison#${hash.slice(0, 16)}`;
}

/** Lease length granted at `now`: capped, and never past the invocation's deadline plus grace. */
export function leaseLength(settings: InboxSettings, now: number, deadline?: number): number {
  if (deadline === undefined) return settings.leaseMs;
  return Math.min(settings.leaseMs, Math.max(0, deadline - now) + settings.leaseGraceMs);
}

const epochSeconds = (ms: number) => Math.floor(ms / 1000);

/**
 * Runs `work` for one delivery of `event` unless the inbox says it must not: once an attempt
 * has completed, no delivery runs the work again; until then, deliveries keep running it
 * (one at a time) until one completes or the failures say a person is needed (`DEAD`: a
 * permanent failure past its small budget, or transient ones past the maximum event age),
 * whatever the platform does: duplicates, concurrent deliveries, out-of-order retries, crashes.
 * A write of this attempt that the SDK resent after it landed is recognized by its owner.
 *
 * State machine of the (consumer, event id) record:
 * - absent -> `PROCESSING` (begin, this attempt owns the lease);
 * - `PROCESSING` with an expired lease, or `FAILED` past its backoff -> `PROCESSING` under a new
 *   owner, attempts + 1 (take-over, conditional on the exact state observed);
 * - `PROCESSING` (owner) -> `PROCESSED` (complete) | `FAILED` (fail, backoff) | `DEAD` (budget or age spent);
 * - `PROCESSED`, `DEAD` -> acknowledged, unchanged; a live `PROCESSING` or a pending backoff ->
 *   InboxInProgressError / InboxBackoffError, so the platform retries later.
 *
 * Invariant: the work runs only while this attempt holds the lease it claimed, and a record
 * leaves `PROCESSING` only by a write fenced on that owner; so an attempt whose lease was taken
 * over can never mark the event processed or failed over the newer attempt's state. A crash at
 * any point leaves `PROCESSING` with a lease that runs out, after which a redelivery takes over:
 * the effect may run again (it must be idempotent itself), but the event is never lost.
 */
export async function processOnce<T>(
  event: InboxEvent,
  work: (ctx: WorkContext) => Promise<T>,
  deps: ProcessOnceDeps,
): Promise<ProcessOutcome<T>> {
  const { inbox, settings } = deps;
  const clock = deps.clock ?? Date.now;
  const owner = deps.owner ?? randomUUID();
  const key: InboxKey = { consumer: event.consumer, eventId: event.eventId };

  let now = clock();
  let grant = { at: now, leaseMs: leaseLength(settings, now, deps.deadline) };
  const begun = await inbox.begin({
    ...key,
    owner,
    leaseUntil: now + grant.leaseMs,
    payloadHash: event.payloadHash,
    eventType: event.eventType,
    subject: event.subject,
    event: event.event,
    now,
  });

  let record = begun.record;
  let takenOver = false;
  if (!begun.created) {
    const existing = begun.record;
    if (existing.payloadHash !== event.payloadHash) {
      const reason = `payload differs from the first delivery of event ${event.eventId} (hash ${event.payloadHash.slice(
        0,
        12,
      )} vs ${existing.payloadHash.slice(0, 12)})`;
      return recordPoison({ ...event, cloudEventId: event.eventId, reason }, deps, now);
    }
    switch (existing.status) {
      case 'PROCESSED':
      case 'DEAD':
        return { kind: 'duplicate', status: existing.status };
      case 'PROCESSING':
        if (existing.leaseUntil >= now) throw new InboxInProgressError(key, existing.leaseUntil - now + 1);
        break;
      case 'FAILED':
        if (existing.nextAttemptAt > now) throw new InboxBackoffError(key, existing.nextAttemptAt - now);
        break;
    }
    const expected: ExpectedState = { status: existing.status, leaseOwner: existing.leaseOwner };
    const age = now - existing.firstAttemptAt;
    if (existing.status === 'PROCESSING' && age >= settings.maxEventAgeMs) {
      // Attempts that crash or time out are retried like transient failures, but not for ever:
      // an event that kills its worker every time stops at the maximum event age.
      const reason = `attempts kept losing their lease (crash or timeout) for ${duration(age)} since the first (max event age ${duration(
        settings.maxEventAgeMs,
      )}); ${existing.attempts} attempts`;
      await markDeadOrInProgress(inbox, key, expected, { now, reason, settings });
      return { kind: 'dead', attempt: existing.attempts, reason };
    }
    try {
      grant = { at: now, leaseMs: leaseLength(settings, now, deps.deadline) };
      record = await inbox.takeOver(key, expected, { owner, leaseUntil: now + grant.leaseMs, now });
      takenOver = true;
    } catch (err) {
      // Someone else moved first (took it over, or finished it): try again later and see.
      if (isInboxError(err, 'RECORD_CHANGED'))
        throw new InboxInProgressError(key, settings.leaseMs, { cause: err });
      throw err;
    }
  }

  const attempt = record.attempts;
  const heartbeat = startHeartbeat(key, owner, grant, deps, clock);
  let result: T;
  try {
    result = await work({ attempt, signal: heartbeat.signal });
  } catch (workError) {
    await heartbeat.stop();
    now = clock();
    const failure = judgeFailure(workError, record, now, settings);
    if (failure.dead) {
      await fencedOrRethrow(workError, () =>
        inbox.markDead(
          key,
          { status: 'PROCESSING', leaseOwner: owner },
          deathAt(now, failure.reason, settings),
        ),
      );
      return { kind: 'dead', attempt, reason: failure.reason };
    }
    const nextAttemptAt = now + backoffDelay(attempt, settings.backoff, deps.random);
    await fencedOrRethrow(workError, () =>
      inbox.fail(key, owner, {
        now,
        firstAttemptAt: record.firstAttemptAt,
        error: failure.message,
        nextAttemptAt,
        kind: failure.kind,
        permanentFailures: failure.permanentFailures,
      }),
    );
    throw workError;
  }
  await heartbeat.stop();
  now = clock();
  await inbox.complete(key, owner, { now, expiresAt: epochSeconds(now) + settings.retentionSeconds });
  return { kind: 'processed', attempt, takenOver, result };
}

/** What one failed attempt means for its record: retried later (`FAILED`) or `DEAD` now. */
interface FailureVerdict {
  readonly kind: FailureKind;
  readonly message: string;
  readonly permanentFailures: number;
  readonly dead: boolean;
  readonly reason: string;
}

/**
 * Judges a failed attempt: a permanent failure spends the consumer's small permanent budget, a
 * transient one is retried until the event's first attempt is the maximum event age old. So a
 * run of bad luck (throttling, a blip of 5xx, a dropped connection) never makes a record
 * `DEAD`, and what cannot succeed still stops after a few tries.
 */
function judgeFailure(
  workError: unknown,
  record: InboxRecord,
  now: number,
  settings: InboxSettings,
): FailureVerdict {
  const kind = failureKind(workError);
  const message = errorText(workError);
  const permanentFailures = record.permanentFailures + (kind === 'permanent' ? 1 : 0);
  if (kind === 'permanent') {
    const dead = permanentFailures >= settings.maxPermanentAttempts;
    const reason = `permanent failure ${permanentFailures} of at most ${settings.maxPermanentAttempts}; last error ${message}`;
    return { kind, message, permanentFailures, dead, reason };
  }
  const age = now - record.firstAttemptAt;
  const dead = age >= settings.maxEventAgeMs;
  const reason = `failing transiently for ${duration(age)} since the first attempt (max event age ${duration(
    settings.maxEventAgeMs,
  )}), ${record.attempts} attempts; last error ${message}`;
  return { kind, message, permanentFailures, dead, reason };
}

/** A duration for a reason text: `95 s`, `42 min`, `26.5 h`. */
function duration(ms: number): string {
  if (ms < 120_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

function deathAt(now: number, reason: string, settings: InboxSettings) {
  return { now, reason, expiresAt: epochSeconds(now) + settings.deadRetentionSeconds };
}

async function markDeadOrInProgress(
  inbox: InboxStore,
  key: InboxKey,
  expected: ExpectedState,
  death: { now: number; reason: string; settings: InboxSettings },
): Promise<void> {
  try {
    // Someone else's attempt: only once its lease has really run out (a late heartbeat wins).
    await inbox.markDead(key, expected, {
      ...deathAt(death.now, death.reason, death.settings),
      leaseLapsedBy: death.now,
    });
  } catch (err) {
    if (isInboxError(err, 'FENCED_OUT'))
      throw new InboxInProgressError(key, death.settings.leaseMs, { cause: err });
    throw err;
  }
}

/**
 * Records the failure of the work, unless a newer attempt owns the record: then that attempt
 * decides, and the work's own error is what the platform sees.
 */
async function fencedOrRethrow(workError: unknown, write: () => Promise<void>): Promise<void> {
  try {
    await write();
  } catch (err) {
    if (isInboxError(err, 'FENCED_OUT')) throw workError;
    throw err;
  }
}

/**
 * Records `poison` `DEAD` at once, with its reason, under its poison key: the one path for an
 * event that can never succeed, whether a consumer found it invalid or {@link processOnce} found
 * another payload under a known id. Never retried; a poison already recorded `DEAD` is a
 * duplicate delivery of it and is acknowledged. The record keeps the dead records' retention.
 */
export async function recordPoison(
  poison: PoisonEvent,
  deps: Pick<ProcessOnceDeps, 'inbox' | 'settings'>,
  now: number,
): Promise<PoisonOutcome> {
  const key = poisonKey(poison.eventId, poison.payloadHash);
  try {
    await deps.inbox.recordPoison({
      consumer: poison.consumer,
      eventId: key,
      cloudEventId: poison.cloudEventId,
      subject: poison.subject,
      eventType: poison.eventType,
      payloadHash: poison.payloadHash,
      reason: poison.reason,
      event: poison.event,
      now,
      expiresAt: epochSeconds(now) + deps.settings.deadRetentionSeconds,
    });
  } catch (err) {
    if (isInboxError(err, 'RECORD_EXISTS')) return { kind: 'duplicate', status: 'DEAD' };
    throw err;
  }
  return { kind: 'poison', reason: poison.reason, poisonKey: key };
}

function errorText(err: unknown): string {
  const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return text.length > 1_000 ? `${text.slice(0, 1_000)}…` : text;
}

interface Heartbeat {
  readonly signal: AbortSignal;
  /** Stops renewing and waits for a renewal in flight, so it cannot land after complete/fail. */
  stop(): Promise<void>;
}

/**
 * Renews the lease at a third of each lease it grants, measured from when that lease was
 * granted: leases shrink as the invocation's deadline nears, so a period fixed from the first
 * lease would let a later, shorter one lapse while the work still runs. At the deadline it
 * stops renewing: the last lease runs out by its grace. A renewal refused by the fence means a newer
 * attempt owns the record: the work is told through the abort signal (and its completion will
 * be refused anyway). Other renewal errors are reported and retried on the next beat, while
 * the lease still has two thirds to run.
 */
function startHeartbeat(
  key: InboxKey,
  owner: string,
  first: { readonly at: number; readonly leaseMs: number },
  deps: ProcessOnceDeps,
  clock: () => number,
): Heartbeat {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  let inFlight: Promise<void> = Promise.resolve();
  const scheduleAfter = (grant: { at: number; leaseMs: number }) => {
    const due = grant.at + Math.max(1, Math.floor(grant.leaseMs / 3));
    timer = setTimeout(beat, Math.max(1, due - clock()));
  };
  const beat = () => {
    if (stopped) return;
    const now = clock();
    // Past the invocation's deadline Lambda has stopped the work, and nothing of it renews:
    // neither does this beat, so the lease runs out by its grace and a retry can take the
    // record over. Locally the work may still be running (the runtime abandons it at the same
    // deadline, infra/local/local-consumers.ts); renewing there kept a hung effect's record
    // PROCESSING for as long as the hang lasted, with no retry able to take it.
    // https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html
    if (deps.deadline !== undefined && now >= deps.deadline) {
      stopped = true;
      return;
    }
    const leaseMs = leaseLength(deps.settings, now, deps.deadline);
    scheduleAfter({ at: now, leaseMs });
    inFlight = deps.inbox.renew(key, owner, now + leaseMs, now).catch((err: unknown) => {
      if (isInboxError(err, 'FENCED_OUT')) {
        stopped = true;
        clearTimeout(timer);
        controller.abort(new InboxFencedOutError(key, owner, 'heartbeat', { cause: err }));
      } else {
        deps.logger?.warn('inbox heartbeat failed; retrying on the next beat', {
          ...key,
          error: errorText(err),
        });
      }
    });
  };
  scheduleAfter(first);
  return {
    signal: controller.signal,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
    },
  };
}
