import { withDeadline } from '../deadline';
import { inboxHealth } from '../inbox/inbox-health';
import type { OutboxStats } from '../outbox/outbox-store';
import type { ConsumerName } from '../topology';
import { type JournalStatus, noAnswer, type OpsContext } from './ops-context';
import {
  type AlarmState,
  type ComponentState,
  type EffectCounts,
  type InboxStatusCounts,
  type RelayHealth,
  type StatusComponent,
  statusComponents,
} from './ops-ports';
import { taskCounts } from './ops-queries';

/**
 * `GET /ops/status`: the figures the alarms watch, the alarms themselves, and whether each
 * component serves. A section whose store could not be read is null and its component is marked
 * down with the cause: the answer is still a 200 with everything else that could be read, since
 * an outage is when an operator needs the page most.
 */
export interface OpsStatus {
  /** Up or down, with the cause and (locally) since when: `postgres`, `dynamo`, `bus`. */
  readonly components: Record<StatusComponent, ComponentState>;
  readonly tasks: Record<string, number> | null;
  /** The relay's figures, and the delivered rows still kept (counted off the relay's path). */
  readonly outbox: (OutboxStats & { readonly delivered: number }) | null;
  readonly consumers: Record<ConsumerName, InboxStatusCounts> | null;
  /** What the effects did; null where the realization cannot count it cheaply (AWS) or its store is down. */
  readonly effects: EffectCounts | null;
  readonly deadLetters: number | null;
  /** The delivery audit: delivered events missing from each consumer's inbox, and its last run. */
  readonly audit: AuditStatus | null;
  /** Each alarm's state; INSUFFICIENT_DATA (locally) for one whose figure could not be read. */
  readonly alarms: Record<string, AlarmState> | null;
  readonly relay: RelayHealth | null;
  /** The local bus's journal: lines a start could not read, kept aside; null where there is none (AWS). */
  readonly journal: JournalStatus | null;
}

/** The delivery audit as `GET /ops/status` shows it. */
export interface AuditStatus {
  /** Open findings per consumer: delivered events with no record in that consumer's inbox. */
  readonly undelivered: Record<ConsumerName, number>;
  readonly lastRunAt: string | null;
  /** How far behind the audit's walk is, in seconds past the grace period (0: caught up). */
  readonly behindSeconds: number;
  /**
   * Local only: effects each consumer performed for events that have no outbox row (a forged or
   * foreign event on the bus), as the audit found them (shared/audit/foreign-effects.ts).
   */
  readonly foreignEffects?: Record<ConsumerName, number>;
}

/** An error's message as a component's cause: what an operator reads first. */
const causeOf = (err: unknown): string =>
  (err instanceof Error ? `${err.name === 'Error' ? '' : `${err.name}: `}${err.message}` : String(err)).slice(
    0,
    500,
  );

/** The status read, `GET /ops/status`, over the stores and sources of `ctx`. */
export function createOpsStatus(ctx: OpsContext) {
  const { db, inbox, outbox, audits, deadLetters, health, logger, clock, consumerNames } = ctx;
  const { auditGraceSeconds, readTimeoutMs } = ctx;

  async function consumerCounts(consumer: ConsumerName): Promise<InboxStatusCounts> {
    const [open, processed] = await Promise.all([
      inbox.openFigures(consumer),
      ctx.processedCount ? ctx.processedCount(consumer) : Promise.resolve(null),
    ]);
    return { processed, ...inboxHealth(open, clock()) };
  }

  async function status(): Promise<OpsStatus> {
    const down = new Map<StatusComponent, string>();
    // Each section on its own: one store down costs its sections, never the whole answer.
    const read = async <T>(
      section: string,
      component: StatusComponent | undefined,
      fn: () => Promise<T>,
    ): Promise<T | null> => {
      try {
        return await withDeadline(fn(), readTimeoutMs, () => new Error(noAnswer(ctx)));
      } catch (err) {
        logger.warn('a status section could not be read', { section, component, error: err });
        if (component && !down.has(component)) down.set(component, causeOf(err));
        return null;
      }
    };
    const [tasks, outboxStats, delivered, consumerList, effects, deadLetterCount, relay, audit, watched] =
      await Promise.all([
        read('tasks', 'postgres', () => taskCounts(db)),
        read('outbox', 'postgres', () => outbox.stats()),
        read('outbox', 'postgres', () => outbox.deliveredCount()),
        read('consumers', 'dynamo', () => Promise.all(consumerNames.map(consumerCounts))),
        ctx.effects ? read('effects', 'dynamo', ctx.effects) : Promise.resolve(null),
        read('deadLetters', 'bus', () => deadLetters.count()),
        read('relay', undefined, () => health.relay()),
        read('audit', 'postgres', () =>
          Promise.all([audits.undeliveredCounts(consumerNames), audits.state(auditGraceSeconds)]),
        ),
        read('components', undefined, async () => (await health.components?.()) ?? {}),
      ]);
    const journal = ctx.journal ? await read('journal', 'bus', ctx.journal) : null;
    const foreignEffects = ctx.foreignEffects
      ? await read('audit', undefined, ctx.foreignEffects)
      : undefined;
    const consumers =
      consumerList &&
      (Object.fromEntries(consumerNames.map((c, i) => [c, consumerList[i]])) as Record<
        ConsumerName,
        InboxStatusCounts
      >);
    const alarms = await read('alarms', undefined, () =>
      health.alarms({
        outbox: outboxStats,
        consumers,
        deadLetters: deadLetterCount,
        undelivered: audit?.[0] ?? null,
        ...(foreignEffects === undefined
          ? {}
          : { foreignEffects: foreignEffects && Object.values(foreignEffects).reduce((n, c) => n + c, 0) }),
      }),
    );
    const components = Object.fromEntries(
      statusComponents.map((c): [StatusComponent, ComponentState] => {
        const known = watched?.[c];
        if (known && !known.up) return [c, known];
        const cause = down.get(c);
        return [c, cause === undefined ? { up: true } : { up: false, cause }];
      }),
    ) as Record<StatusComponent, ComponentState>;
    return {
      components,
      tasks,
      outbox: outboxStats && delivered !== null ? { ...outboxStats, delivered } : null,
      consumers,
      effects,
      deadLetters: deadLetterCount,
      audit: audit && {
        undelivered: audit[0],
        lastRunAt: audit[1].lastRunAt,
        behindSeconds: audit[1].behindSeconds,
        ...(foreignEffects ? { foreignEffects } : {}),
      },
      alarms,
      relay,
      journal,
    };
  }

  return { status };
}
