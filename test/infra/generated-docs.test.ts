import { describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { readMeasuredCosts } from '../../infra/aws/capacity/measured';
import { capacityText, stageCapacity, stages } from '../../infra/aws/capacity/render';
import { sandboxIdleGoalUsd } from '../../infra/aws/cost/model';
import { costText, stageCost } from '../../infra/aws/cost/render';
import { synthesizeStage } from '../../infra/aws/synthesize';
import { readDoc, readSection } from '../../infra/docs/doc-section';

// The cost and capacity tables in docs/aws.md are what `npm run cost -- --docs` and
// `npm run capacity -- --docs` wrote, never typed: each is rendered again here from the stacks
// as they synthesize now, so a change that moves a figure fails until the docs are written
// again with those commands.
describe('the generated sections of docs/aws.md', () => {
  const templates = new Map(stages.map((stage) => [stage, synthesizeStage(topology, stage)]));
  const template = (stage: (typeof stages)[number]) =>
    templates.get(stage) as ReturnType<typeof synthesizeStage>;
  const docs = readDoc('docs/aws.md');

  it('carries what npm run cost prints now', () => {
    const costs = stages.map((stage) => stageCost(stage, template(stage), topology));
    expect(readSection(docs, 'cost')).toBe(costText(costs));
    // The promise the README makes of it: an idle sandbox costs under its goal ($10 a month for
    // the three consumers it ships, more by each one added) but for its SQS mappings' polling,
    // which docs/aws.md prices as the trade it is (test/unit/cost-model.test.ts).
    const sandbox = costs.find((c) => c.stage === 'sandbox');
    const polling = sandbox?.idle.low.parts.find((p) => p.name === 'SQS (event source mappings polling)');
    expect((sandbox?.idle.low.totalUsd ?? 0) - (polling?.usd ?? 0)).toBeLessThan(
      sandboxIdleGoalUsd(topology.registry.length),
    );
  });

  it('carries what npm run capacity prints now', () => {
    const measured = readMeasuredCosts();
    const results = stages.flatMap((stage) => stageCapacity(stage, template(stage), topology, measured));
    expect(readSection(docs, 'capacity')).toBe(capacityText(results, measured.measuredAt));
  });
});
