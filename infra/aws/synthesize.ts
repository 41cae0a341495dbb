import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Topology } from '../../shared/topology';
import { projectRoot } from './constructs/pipeline-function';
import type { CfnTemplate } from './cost/model';
import { createPipelineApp } from './pipeline-app';
import type { Stage } from './settings';

/**
 * The stack's template as `cdk synth -c stage=<stage>` writes it, minus the asset bundling:
 * what `npm run cost` and `npm run capacity` read. Offline, no credentials.
 */
export function synthesizeStage(topology: Topology, stage: Stage): CfnTemplate {
  const cdkJson = JSON.parse(readFileSync(join(projectRoot, 'cdk.json'), 'utf8')) as {
    context?: Record<string, unknown>;
  };
  // CDK's own switch for "synthesize, bundle no stack": the template is the same, no esbuild runs.
  const context = { ...cdkJson.context, stage, 'aws:cdk:bundling-stacks': [] };
  const outdir = mkdtempSync(join(tmpdir(), 'content-pipeline-synth-'));
  try {
    const { app, stack } = createPipelineApp(topology, {
      context,
      outdir,
      builtinCloudFormationValidation: false,
    });
    return app.synth().getStackArtifact(stack.artifactId).template as CfnTemplate;
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}
