import { type BusIdentity, deliveredBusEvent } from '../events/bus-event';
import { HttpError } from '../http/error-responses';
import { isInboxError } from '../inbox/errors';
import { isStuck } from '../inbox/inbox-ops';
import type { InboxRecord } from '../inbox/inbox-store';
import { inboxSettingsFor } from '../inbox/settings';
import type { DeadRedriveCursor } from '../outbox/outbox-store';
import type { ConsumerName } from '../topology';
import { type OpsContext, opsListLimits } from './ops-context';

/** What a redrive answers: how many, and whether that was everything (a redrive of all may stop early). */
export interface Redriven {
  readonly redriven: number;
  readonly complete: boolean;
}

/** What a redrive names: one event (for one consumer, where the list holds several), or everything. */
export type RedriveTarget = { eventId: string } | { all: true };
/** The same, where one event may be several consumers' (the bus's dead letters): for one of them, or for each. */
export type ConsumerRedriveTarget = { eventId: string; consumer?: ConsumerName } | { all: true };
/** What an audit redrive names: one event, or every finding not re-sent since `since` (this call's start). */
export type AuditRedriveTarget = { eventId: string; consumer?: ConsumerName } | { all: true; since?: string };

/** Rows a redrive of every dead outbox event puts back per statement. */
const outboxRedriveBatch = 1_000;
/** Findings an audit redrive of everything reads and re-sends per round. */
const auditRedriveBatch = 100;

/** The redrives of the outbox, each consumer's inbox, the bus's dead letters and the audit's findings. */
export function createOpsRedrives(ctx: OpsContext) {
  const { inbox, inboxStore, outbox, audits, deadLetters, redelivery, nudger, logger, clock } = ctx;
  const { consumerNames, auditGraceSeconds, stuckAfterSeconds } = ctx;

  async function redriveOutbox(target: RedriveTarget, stopBy: number): Promise<Redriven> {
    let redriven = 0;
    let complete = true;
    if ('eventId' in target) {
      if (!(await outbox.redriveDead(target.eventId))) {
        throw new HttpError(404, `no dead outbox event ${target.eventId}`);
      }
      redriven = 1;
    } else {
      // A thousand rows per statement: a few statements even for a big backlog. The walk takes
      // each dead event once: one put back that dies again while this goes on is behind it.
      let after: DeadRedriveCursor | null = null;
      for (;;) {
        const batch = await outbox.redriveDeadBatch(outboxRedriveBatch, after);
        redriven += batch.redriven;
        after = batch.last;
        if (batch.last === null || batch.redriven < outboxRedriveBatch) break;
        if (clock() >= stopBy) {
          complete = false;
          break;
        }
      }
    }
    if (redriven > 0) {
      await nudger.nudge().catch((err: unknown) =>
        logger.warn('relay nudge after redrive failed; the next sweep publishes the events', {
          error: err,
        }),
      );
    }
    return { redriven, complete };
  }

  /**
   * Redrives one DEAD inbox record: reset it (the next delivery may run the effect again),
   * then hand the stored event to the consumer. A record whose event was stored truncated
   * cannot be re-sent and is left DEAD (409). If the hand-over fails, the record goes back to
   * DEAD so it stays listed, and the failure is a 500: a store or invoke error is never a 404.
   */
  async function redriveInboxRecord(consumer: ConsumerName, eventId: string): Promise<boolean> {
    const current = await inbox.get({ consumer, eventId });
    if (current?.status !== 'DEAD') return false;
    if (typeof current.event !== 'object' || current.event === null) {
      throw new HttpError(
        409,
        `the stored event of ${consumer}/${eventId} was truncated; it cannot be re-sent`,
        {
          currentStatus: current.status,
        },
      );
    }
    let reset: InboxRecord;
    try {
      reset = await inbox.redrive({ consumer, eventId }, clock());
    } catch (err) {
      if (isInboxError(err, 'NOT_FOUND', 'NOT_DEAD')) return false;
      throw err;
    }
    try {
      await redelivery.redeliver(consumer, reset.event);
    } catch (err) {
      const now = clock();
      await inboxStore.markDead(
        { consumer, eventId },
        { status: 'FAILED', leaseOwner: reset.leaseOwner },
        {
          now,
          reason: `redrive could not re-send the event: ${err instanceof Error ? err.message : String(err)}`,
          expiresAt: Math.floor(now / 1000) + inboxSettingsFor(ctx.topology, consumer).deadRetentionSeconds,
        },
      );
      throw err;
    }
    return true;
  }

  /**
   * Re-sends a record nothing will retry (`FAILED` or `PROCESSING`, nothing due on it for
   * `stuckAfterSeconds`: its delivery was lost), as the delivery audit does on its own: the
   * stored event, or (stored truncated) the event rebuilt from its outbox row. The record is
   * not changed, so there is no step between two writes for a crash to fall into.
   */
  async function resendStuckRecord(
    consumer: ConsumerName,
    eventId: string,
    bus: BusIdentity,
  ): Promise<boolean> {
    const current = await inbox.get({ consumer, eventId });
    if (!current || !isStuck(current, clock() - stuckAfterSeconds * 1_000)) return false;
    let event = current.event;
    if (typeof event !== 'object' || event === null) {
      const row = (await audits.deliveredEvents([eventId])).get(eventId);
      if (!row) {
        throw new HttpError(
          409,
          `the stored event of ${consumer}/${eventId} was truncated and its outbox row is gone`,
        );
      }
      event = deliveredBusEvent(row, row.busEventId, bus);
    }
    await redelivery.redeliver(consumer, event);
    return true;
  }

  async function redriveInbox(
    consumer: ConsumerName,
    target: RedriveTarget,
    stopBy: number,
    bus: BusIdentity,
  ): Promise<Redriven> {
    if ('eventId' in target) {
      if (
        !(await redriveInboxRecord(consumer, target.eventId)) &&
        !(await resendStuckRecord(consumer, target.eventId, bus))
      ) {
        throw new HttpError(
          404,
          `no dead ${consumer} inbox record ${target.eventId}, nor one nothing will retry`,
        );
      }
      return { redriven: 1, complete: true };
    }
    // Each record at most once per request: one that dies again while this goes on is listed
    // again after the cursor (its death is newer) and must not be redriven again, or a redrive
    // of records that keep dying runs until its deadline.
    const seen = new Set<string>();
    let redriven = 0;
    let cursor: string | undefined;
    do {
      const page = await inbox.listDead(consumer, { limit: opsListLimits.inboxDead, cursor });
      for (const r of page.records) {
        if (seen.has(r.eventId)) continue;
        seen.add(r.eventId);
        // Between records only, never between a reset and its hand-over.
        if (clock() >= stopBy) return { redriven, complete: false };
        if (await redriveInboxRecord(consumer, r.eventId).catch(skipTruncated)) redriven++;
      }
      cursor = page.cursor;
    } while (cursor);
    return { redriven, complete: true };
  }

  // In a redrive of everything, a record that cannot be re-sent stays DEAD and the rest go on.
  const skipTruncated = (err: unknown): false => {
    if (err instanceof HttpError && err.statusCode === 409) return false;
    throw err;
  };

  async function redriveDeadLetters(target: ConsumerRedriveTarget, stopBy: number): Promise<Redriven> {
    if ('eventId' in target) {
      const redriven = await deadLetters.redrive({ id: target.eventId, consumer: target.consumer });
      if (redriven === 0) throw new HttpError(404, `no dead letter ${target.eventId}`);
      return { redriven, complete: true };
    }
    // One pass takes what each queue hands out (up to 1,000 messages on AWS): pass again until
    // a pass finds nothing, or the time is up. Only letters dead before this request began: one
    // it redrove that dies again meanwhile is a new letter, and passing again for it would
    // redrive letters that keep dying until the deadline.
    const startedAt = clock();
    let redriven = 0;
    for (;;) {
      const pass = await deadLetters.redrive('all', stopBy, startedAt);
      redriven += pass;
      if (pass === 0) return { redriven, complete: true };
      if (clock() >= stopBy) return { redriven, complete: false };
    }
  }

  /**
   * Re-sends what the audit found missing: each finding's event, rebuilt from its outbox row as
   * the bus delivered it, handed to its consumer the way an inbox redrive hands a stored event
   * (an async invoke on AWS, the bus locally), so the inbox keeps it once whatever else arrives.
   * A finding stays open, noted as re-sent, until an audit run finds the record. An event the
   * outbox no longer keeps (purged after its retention) cannot be rebuilt: 409 for one, skipped in all.
   */
  async function redriveAudit(
    target: AuditRedriveTarget,
    stopBy: number,
    bus: BusIdentity,
  ): Promise<Redriven & { readonly skipped: number; readonly since?: string }> {
    let redriven = 0;
    let skipped = 0;
    const resend = async (findings: readonly { eventId: string; consumer: ConsumerName }[]) => {
      const events = await audits.deliveredEvents(findings.map((f) => f.eventId));
      for (const f of findings) {
        const row = events.get(f.eventId);
        if (!row) {
          skipped++;
          continue;
        }
        await redelivery.redeliver(f.consumer, deliveredBusEvent(row, row.busEventId, bus));
        await audits.noteRedrive(f.eventId, f.consumer);
        redriven++;
      }
    };
    if ('eventId' in target) {
      const findings = await audits.toRedrive(consumerNames.length, target);
      if (findings.length === 0) {
        throw new HttpError(
          404,
          `no audit finding for event ${target.eventId}${target.consumer ? ` and consumer ${target.consumer}` : ''}`,
        );
      }
      await resend(findings);
      if (redriven === 0) {
        throw new HttpError(409, `event ${target.eventId} is no longer in the outbox; it cannot be re-sent`);
      }
      return { redriven, skipped, complete: true };
    }
    // Those re-sent within the grace period are on their way, and those re-sent since the call
    // began (`since`, the database's time, answered so that a repeated request after `complete:
    // false` carries it on) were re-sent by this call: a second pass or request leaves both, so
    // each finding is re-sent at most once per call and the call always moves on. `attempted`
    // keeps one that cannot be re-sent (left un-noted) from being read again in this request.
    const since = target.since ?? (await audits.now());
    const attempted = new Set<string>();
    for (;;) {
      const batch = await audits.toRedrive(auditRedriveBatch, { quietSeconds: auditGraceSeconds, since });
      const fresh = batch.filter((f) => !attempted.has(`${f.eventId}#${f.consumer}`));
      for (const f of fresh) attempted.add(`${f.eventId}#${f.consumer}`);
      if (fresh.length === 0) return { redriven, skipped, complete: true, since };
      await resend(fresh);
      if (clock() >= stopBy) return { redriven, skipped, complete: false, since };
    }
  }

  return { redriveOutbox, redriveInbox, redriveDeadLetters, redriveAudit };
}
