/**
 * The latency model run as a simulation of the AWS path, hop by hop, with no local runtime in
 * the way: each approval arriving at a steady rate goes through API Gateway, the tasks API's
 * Lambda (an environment from its pool, a cold start when none is idle), its one Data API
 * call, and the nudge's Invoke when no relay run holds the lease; the relay is the run the
 * lease makes it (one primary run draining rounds: claim, PutEvents calls ten at a time, mark,
 * a look at what is due, and, with nothing due, the release, the wait for the writers and a last
 * look); each event then reaches each consumer through EventBridge's delivery to the consumer's
 * queue and the queue's event source mapping (the queue hop), its own environment pool, and does
 * its inbox and effect calls.
 *
 * Why a simulation beside the measured runs (bench/e2e.bench.ts under the model): the local
 * runtime does the real work of every function on this machine's two cores, about 25 ms of CPU
 * an approval, so at 100 approvals/s it measures the machine; on AWS every function has cores
 * of its own, and only the hops remain. At 20/s both are run: they agree within the spread of
 * the hops (docs/performance.md).
 */

import { topology } from '../../functions/topology';
import { seededRandom } from '../../infra/local/faults';
import type { ConsumerDefinition } from '../../shared/consumers/define-consumer';
import { type Hop, type LatencyModel, latencyModel, sampler } from './latency-model';

/** What the simulation says, in ms. */
export interface SimulatedLatency {
  readonly approvals: number;
  readonly rate: number;
  readonly approveP50Ms: number;
  readonly approveP99Ms: number;
  readonly effectsP50Ms: number;
  readonly effectsP99Ms: number;
  /** Nudges the tasks API sent (it sends none while a run holds the lease). */
  readonly nudges: number;
  /** Relay runs started. */
  readonly relayRuns: number;
  /** Cold starts, per function. */
  readonly coldStarts: Readonly<Record<string, number>>;
}

/**
 * Environments of one function in simulated time: an invocation starting at `t` takes one that
 * is idle by then, or a new one (a cold start).
 */
class SimulatedPool {
  private readonly freeAt: number[] = [];
  created = 0;
  /** Returns whether the invocation starting at `start` is cold; `end` is when it gives the environment back. */
  take(start: number, end: (cold: boolean) => number): number {
    const i = this.freeAt.findIndex((t) => t <= start);
    const cold = i < 0;
    if (cold) this.created++;
    else this.freeAt.splice(i, 1);
    const until = end(cold);
    this.freeAt.push(until);
    return until;
  }
}

const percentile = (sorted: readonly number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;

const times = (n: number, hop: Hop): Hop[] => Array.from({ length: n }, () => hop);

/**
 * What a consumer does per event, as calls, from the resources it declares: the inbox's begin,
 * then its effect (what it reads first: its database calls and table gets; then its table puts,
 * its objects and its publishes), then the inbox's complete.
 */
export function consumerCalls(consumer: ConsumerDefinition): Hop[] {
  const reads: Hop[] = [];
  const writes: Hop[] = [];
  for (const resource of Object.values(consumer.resources)) {
    if (resource.kind === 'database') reads.push(...times(resource.perEvent.calls, 'dataApiCall'));
    else if (resource.kind === 'table') {
      reads.push(...times(resource.perEvent.reads, 'dynamoDbCall'));
      writes.push(...times(resource.perEvent.writes, 'dynamoDbCall'));
    } else if (resource.kind === 'bucket') writes.push(...times(resource.perEvent.puts, 's3Put'));
    else writes.push(...times(resource.perEvent.publishes, 'snsPublish'));
  }
  return ['dynamoDbCall', ...reads, ...writes, 'dynamoDbCall'];
}

/** Runs `approvals` approvals at `rate` a second through the model; the same seed gives the same figures. */
export function simulateLatency(options: {
  readonly approvals: number;
  readonly rate: number;
  readonly seed?: number;
  readonly model?: LatencyModel;
  /** Rows a relay claim takes at most (`topology.relay.claimBatchSize`). */
  readonly claimBatchSize?: number;
  /** PutEvents entries per call and calls in flight (`topology.relay`). */
  readonly putEventsMaxEntries?: number;
  readonly publishConcurrency?: number;
  /** The consumers; those subscribed to `content.approved` take each event. @default the project's registry */
  readonly registry?: readonly ConsumerDefinition[];
}): SimulatedLatency {
  const model = options.model ?? latencyModel;
  const random = seededRandom(options.seed ?? 1);
  const draw = (hop: Hop) => sampler(model[hop], random)();
  const batch = options.claimBatchSize ?? 1_000;
  const perCall = options.putEventsMaxEntries ?? 10;
  const inFlight = options.publishConcurrency ?? 10;
  const consumers = (options.registry ?? topology.registry)
    .filter((c) => c.subscribes.includes(topology.eventTypes.approved))
    .map((c) => ({ name: c.name, calls: consumerCalls(c), pool: new SimulatedPool() }));
  const pools = { tasksApi: new SimulatedPool(), relay: new SimulatedPool() };

  // The tasks API's side of each approval, in order of arrival, up to its commit.
  const requestAt: number[] = [];
  const committedAt: number[] = [];
  const gateways: number[] = [];
  for (let i = 0; i < options.approvals; i++) {
    const at = (i * 1_000) / options.rate;
    const gateway = draw('apiGateway');
    const start = at + gateway / 2 + draw('lambdaInvoke');
    let commit = start;
    // The environment is held to the commit and the nudge's Invoke call after it, at most.
    pools.tasksApi.take(start, (cold) => {
      commit = start + (cold ? draw('coldStart') : 0) + draw('dataApiCall');
      return commit + draw('lambdaInvokeApi');
    });
    requestAt.push(at);
    gateways.push(gateway);
    committedAt.push(commit);
  }

  // The relay, as the run lease makes it: a run at a time (the primary; no helpers at these
  // rates: a helper starts only when a claim of 1,000 rows comes back full). A run starts when
  // a change that committed after the last run let the lease go nudges it; changes that commit
  // while a run holds the lease nudge nobody, and that run claims them.
  const holds: [number, number][] = [];
  const onBusAt: number[] = new Array(options.approvals).fill(Number.NaN);
  let next = 0;
  let relayRuns = 0;
  while (next < options.approvals) {
    const nudged = committedAt[next] as number;
    const invoked = nudged + draw('lambdaInvokeApi') + draw('asyncQueue');
    relayRuns++;
    pools.relay.take(invoked, (cold) => {
      const acquired = invoked + (cold ? draw('coldStart') : 0) + draw('dataApiCall');
      let t = acquired;
      let released = acquired;
      for (;;) {
        // A claim takes what committed before it ran, up to a batch.
        const claimAt = t;
        t += draw('dataApiCall');
        let last = next;
        while (last < options.approvals && (committedAt[last] as number) <= claimAt && last - next < batch)
          last++;
        const claimedRows = last > next;
        if (claimedRows) {
          // PutEvents calls of `perCall` entries, `inFlight` at a time; an entry is on the bus when its call returns.
          const calls = Math.ceil((last - next) / perCall);
          let waveStart = t;
          for (let w = 0; w < calls; w += inFlight) {
            let waveEnd = waveStart;
            for (let c = w; c < Math.min(calls, w + inFlight); c++) {
              const done = waveStart + draw('putEvents');
              for (let r = next + c * perCall; r < Math.min(last, next + (c + 1) * perCall); r++)
                onBusAt[r] = done;
              waveEnd = Math.max(waveEnd, done);
            }
            waveStart = waveEnd;
          }
          t = waveStart + draw('dataApiCall'); // mark delivered
          next = last;
        }
        t += draw('dataApiCall'); // what is due now
        if (next < options.approvals && (committedAt[next] as number) <= t) continue;
        // Nothing due: give the lease up, wait for the writers that began before, look once more.
        t += draw('dataApiCall');
        released = t;
        t += 2 * draw('dataApiCall');
        if (next < options.approvals && (committedAt[next] as number) <= t) {
          // Rows committed meanwhile: the lease is taken again (their nudges find it held).
          t += draw('dataApiCall');
          holds.push([acquired, released]);
          continue;
        }
        break;
      }
      holds.push([acquired, released]);
      return t;
    });
  }

  // The approve API's answer: a change that saw no run holding the lease waited for its Invoke.
  const held = (t: number) => holds.some(([from, to]) => t >= from && t < to);
  let nudges = 0;
  const approveMs = committedAt.map((commit, i) => {
    const nudge = !held(commit);
    if (nudge) nudges++;
    return (
      commit + (nudge ? draw('lambdaInvokeApi') : 0) + (gateways[i] as number) / 2 - (requestAt[i] as number)
    );
  });

  // Each event to each consumer: EventBridge's delivery, an environment, the inbox and the effect.
  const doneAt = new Array(options.approvals).fill(0);
  for (const consumer of consumers) {
    const starts = onBusAt
      .map((bus, i) => ({ i, start: bus + draw('eventDelivery') + draw('queueHop') }))
      .sort((a, b) => a.start - b.start);
    for (const { i, start } of starts) {
      const end = consumer.pool.take(start, (cold) => {
        let t = start + (cold ? draw('coldStart') : 0);
        for (const hop of consumer.calls) t += draw(hop);
        return t;
      });
      doneAt[i] = Math.max(doneAt[i], end);
    }
  }

  const sortedApprove = [...approveMs].sort((a, b) => a - b);
  const effects = doneAt.map((d, i) => d - (requestAt[i] as number)).sort((a, b) => a - b);
  const round = (ms: number) => Math.round(ms);
  return {
    approvals: options.approvals,
    rate: options.rate,
    approveP50Ms: round(percentile(sortedApprove, 50)),
    approveP99Ms: round(percentile(sortedApprove, 99)),
    effectsP50Ms: round(percentile(effects, 50)),
    effectsP99Ms: round(percentile(effects, 99)),
    nudges,
    relayRuns,
    coldStarts: Object.fromEntries(
      [...Object.entries(pools), ...consumers.map((c) => [c.name, c.pool] as const)].map(([name, pool]) => [
        name,
        pool.created,
      ]),
    ),
  };
}
