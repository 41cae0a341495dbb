import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Environment } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { CloudAssembly } from 'aws-cdk-lib/cx-api';
import { topology } from '../../../functions/topology';
import { projectRoot } from '../../../infra/aws/constructs/pipeline-function';
import { createPipelineApp, type PipelineApp } from '../../../infra/aws/pipeline-app';
import type { Topology } from '../../../shared/topology';

export interface SynthOptions {
  /** The pipeline to synthesize: a test's variant. @default the project's (`functions/topology.ts`) */
  readonly topology?: Topology;
  /**
   * Run esbuild for every function. Off, CDK's own `aws:cdk:bundling-stacks` context skips
   * bundling (what `cdk deploy -e OtherStack` does): the template is the same but the assets
   * are not built. One test file bundles for real; the others need only the template.
   */
  readonly bundle?: boolean;
  /**
   * Run CDK's built-in CloudFormation template validation (a WASM rule engine, several seconds
   * of CPU per process). On where a test stands in for `cdk synth`; off elsewhere for speed.
   */
  readonly cfnValidation?: boolean;
  /** The stack's account and region, as an app of a user's own may pin them. @default environment-agnostic */
  readonly env?: Environment;
}

export interface Synthesized extends PipelineApp {
  readonly template: Template;
  readonly assembly: CloudAssembly;
  /** The raw template, for checks that walk every resource. */
  readonly json: { Resources: Record<string, CfnResourceJson>; Outputs?: Record<string, unknown> };
}

export interface CfnResourceJson {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
  readonly DeletionPolicy?: string;
  readonly UpdateReplacePolicy?: string;
  readonly DependsOn?: string[];
}

/** The context `cdk synth` runs with: cdk.json's feature flags, then the test's keys. */
export function cdkJsonContext(): Record<string, unknown> {
  const cdkJson = JSON.parse(readFileSync(join(projectRoot, 'cdk.json'), 'utf8')) as {
    context?: Record<string, unknown>;
  };
  return { ...cdkJson.context };
}

/**
 * Synthesizes the pipeline app as the CLI would (cdk.json context plus `context`), into a
 * fresh temporary cloud assembly. cdk-nag runs as part of it: a finding fails the synth.
 */
export function synthPipeline(
  context: Record<string, unknown> = {},
  options: SynthOptions = {},
): Synthesized {
  const ctx: Record<string, unknown> = { ...cdkJsonContext(), ...context };
  if (!options.bundle) ctx['aws:cdk:bundling-stacks'] = [];
  const outdir = mkdtempSync(join(tmpdir(), 'content-pipeline-cdk-'));
  const pipeline = createPipelineApp(
    options.topology ?? topology,
    { context: ctx, outdir, builtinCloudFormationValidation: options.cfnValidation ?? false },
    { env: options.env },
  );
  const assembly = pipeline.app.synth();
  const template = Template.fromStack(pipeline.stack);
  return { ...pipeline, template, assembly, json: template.toJSON() as Synthesized['json'] };
}

/** Resources of one type, by logical id. */
export function resourcesOfType(synth: Pick<Synthesized, 'json'>, type: string): [string, CfnResourceJson][] {
  return Object.entries(synth.json.Resources).filter(([, r]) => r.Type === type);
}

/** The Properties of one resource; throws when the template has no such resource. */
export function propertiesOf(synth: Pick<Synthesized, 'json'>, logicalId: string): Record<string, unknown> {
  const resource = synth.json.Resources[logicalId];
  if (!resource) throw new Error(`no resource ${logicalId} in the template`);
  return resource.Properties ?? {};
}
