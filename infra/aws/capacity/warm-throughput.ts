import { approvedConsumers, type CostTopology, declaredResources } from '../cost/model';
import type { PriceBook } from '../cost/prices';
import { capacityAssumptions } from './model';
import type { QuotaBook } from './quotas';

/** Write units one approval takes of each table the consumers write, before any template exists. */
export interface WriteUnitsPerApproval {
  /** The inbox: its table and its operator's index (keys only: one unit a write). */
  readonly inbox: { readonly table: number; readonly index: number };
  /** Each table a consumer declares, by resource key. */
  readonly declared: Readonly<Record<string, number>>;
}

/** Write units of one write of an item of `itemKb` (DynamoDB bills a write per started KB). */
export const writeUnits = (itemKb: number): number => Math.max(1, Math.ceil(itemKb));

/**
 * What one approval writes, by table: the capacity model's own arithmetic (every consumer a
 * `content.approved` event reaches: begin and complete on the inbox table, the open-records
 * entry written and removed; each declared table its `perEvent.writes`), read from the topology
 * and the price book's item sizes. The capacity model reads the same from a synthesized template
 * (test/unit/capacity-model.test.ts holds the two equal), but the stack needs it before there is one.
 */
export function writeUnitsPerApproval(topology: CostTopology, prices: PriceBook): WriteUnitsPerApproval {
  const consumers = approvedConsumers(topology);
  const writes = capacityAssumptions.inboxWritesPerEvent;
  return {
    inbox: {
      table: consumers.length * writes.table * writeUnits(prices.assumptions.inboxItemKb.value),
      index: consumers.length * writes.index,
    },
    declared: Object.fromEntries(
      declaredResources(consumers, 'table').map((t) => [
        t.key,
        t.spec.perEvent.writes * writeUnits(t.spec.perEvent.itemKb),
      ]),
    ),
  };
}

/** The warm write throughput of each table at a rate: absent where a new table's default serves it. */
export interface WarmWrites {
  readonly inbox: { readonly table?: number; readonly index?: number };
  readonly declared: Readonly<Record<string, number | undefined>>;
}

/**
 * Room above the rate a table is pre-warmed for: a steady rate is a mean, and arrivals come in
 * bursts above it; a quarter more keeps the goal rate off the table's edge.
 */
export const warmHeadroom = 1.25;

/**
 * The write units a second each table must serve at once for `approvalsPerSec` approvals (with
 * `warmHeadroom`), where that is more than a new on-demand table serves
 * (`quotas.dynamoNewTableWarmWru`): what the stack sets as its `WarmThroughput.WriteUnitsPerSecond`.
 * Rounded up to a hundred.
 */
export function warmWritesFor(
  approvalsPerSec: number,
  perApproval: WriteUnitsPerApproval,
  quotas: Pick<QuotaBook, 'dynamoNewTableWarmWru'>,
): WarmWrites {
  const needed = (unitsPerApproval: number): number | undefined => {
    const units = Math.ceil((approvalsPerSec * warmHeadroom * unitsPerApproval) / 100) * 100;
    return units > quotas.dynamoNewTableWarmWru.value ? units : undefined;
  };
  return {
    inbox: { table: needed(perApproval.inbox.table), index: needed(perApproval.inbox.index) },
    declared: Object.fromEntries(
      Object.entries(perApproval.declared).map(([key, units]) => [key, needed(units)]),
    ),
  };
}
