import { existsSync, readFileSync } from 'node:fs';
import * as z from 'zod';
import { consumerNames } from '../../functions/topology';
import {
  type EffectArrival,
  type ForeignEffect,
  type ForeignEffectDeps,
  findForeignEffects,
} from '../../shared/audit/foreign-effects';
import type { ConsumerName } from '../../shared/topology';
import { writeJsonDurably } from './postgres-data-location';

/** Arrivals held for the next check at most; past it the oldest are dropped, and said so. */
const maxPending = 200_000;

const kept = z.object({
  findings: z.array(
    z.object({
      consumer: z.string(),
      eventId: z.string(),
      eventType: z.string(),
      subject: z.string().nullable(),
      status: z.enum(['PROCESSING', 'PROCESSED', 'FAILED', 'DEAD']),
      receivedAt: z.string(),
      foundAt: z.string(),
      reason: z.string(),
    }),
  ),
});

/**
 * The local runtime's watch for effects of events the pipeline never committed (see
 * shared/audit/foreign-effects.ts): each event a consumer processed is noted as it completes
 * (and, after a start that followed an unclean stop, every record the inbox received within the
 * outbox's retention, which the runtime lost the notes of), and each delivery audit run checks
 * the notes against the outbox. What it finds is kept in `file` (written durably), logged with
 * its reason, counted in `/ops/status` (`audit.foreignEffects`) and alarmed (`foreign-effects`)
 * until a person has looked: removing the file while the runtime is stopped clears them.
 */
export class ForeignEffectsWatch {
  private pending = new Map<string, EffectArrival>();
  private readonly findings: ForeignEffect[];
  private dropped = 0;

  constructor(
    private readonly file: string,
    private readonly log: (message: string, extra?: Record<string, unknown>) => void,
  ) {
    this.findings = existsSync(file) ? this.load() : [];
  }

  /** A consumer processed an event: checked by the next run. */
  note(arrival: EffectArrival): void {
    const key = `${arrival.consumer}#${arrival.eventId}`;
    this.pending.delete(key);
    this.pending.set(key, arrival);
    if (this.pending.size > maxPending) {
      const oldest = this.pending.keys().next().value as string;
      this.pending.delete(oldest);
      if (this.dropped++ === 0) {
        this.log(
          `delivery audit: more than ${maxPending} effects wait to be checked against the outbox; the oldest are dropped unchecked`,
        );
      }
    }
  }

  /** Events noted and not checked yet. */
  get waiting(): number {
    return this.pending.size;
  }

  /**
   * Checks every arrival noted so far; the ones of events without an outbox row are kept, logged
   * and returned. Arrivals a failed check could not judge are noted again for the next one.
   */
  async check(deps: ForeignEffectDeps): Promise<readonly ForeignEffect[]> {
    const batch = [...this.pending.values()];
    this.pending = new Map();
    let found: ForeignEffect[];
    try {
      found = await findForeignEffects(batch, deps);
    } catch (err) {
      for (const a of batch) if (!this.pending.has(`${a.consumer}#${a.eventId}`)) this.note(a);
      throw err;
    }
    const known = new Set(this.findings.map((f) => `${f.consumer}#${f.eventId}`));
    const fresh = found.filter((f) => !known.has(`${f.consumer}#${f.eventId}`));
    if (fresh.length === 0) return [];
    this.findings.push(...fresh);
    writeJsonDurably(this.file, { findings: this.findings }, 0o600);
    for (const f of fresh) {
      this.log(`delivery audit: ${f.reason}`, {
        component: 'audit',
        consumer: f.consumer,
        eventId: f.eventId,
        subject: f.subject,
        status: f.status,
        file: this.file,
      });
    }
    return fresh;
  }

  /** Effects of uncommitted events found so far, per consumer. */
  counts(): Record<ConsumerName, number> {
    const counts = Object.fromEntries(consumerNames.map((c) => [c, 0])) as Record<ConsumerName, number>;
    for (const f of this.findings) counts[f.consumer] = (counts[f.consumer] ?? 0) + 1;
    return counts;
  }

  /** Every finding kept, oldest first. */
  list(): readonly ForeignEffect[] {
    return this.findings;
  }

  private load(): ForeignEffect[] {
    const parsed = kept.safeParse(
      (() => {
        try {
          return JSON.parse(readFileSync(this.file, 'utf8'));
        } catch {
          return undefined;
        }
      })(),
    );
    if (!parsed.success) {
      throw new Error(
        `${this.file} is not what this runtime wrote there: restore it, or remove it and start again`,
      );
    }
    return parsed.data.findings as ForeignEffect[];
  }
}
