import { App, type AppProps, type Environment, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks, ServerlessChecks } from 'cdk-nag';
import type { Topology } from '../../shared/topology';
import { PipelineStack } from './pipeline-stack';
import { type PipelineSettings, parseSettings } from './settings';

/** The app and the one stack in it, as `cdk synth` builds them and the infra tests inspect them. */
export interface PipelineApp {
  readonly app: App;
  readonly stack: PipelineStack;
  readonly settings: PipelineSettings;
}

/** What a test (or an app of a user's own) may set beyond context. */
export interface PipelineAppOptions {
  /** The stack's account and region. @default environment-agnostic */
  readonly env?: Environment;
}

/** The stack's name: one pipeline per stage in an account and region. */
export const stackName = (settings: Pick<PipelineSettings, 'stage'>): string =>
  `ContentPipeline-${settings.stage}`;

/**
 * Builds the CDK app of `topology` (the project's, `functions/topology.ts`, or a test's variant) from context (`-c stage=... -c target=...`, or `props.context` in tests),
 * with cdk-nag's AWS Solutions and Serverless packs registered as validation plugins: every
 * synth fails on a finding that is not acknowledged with a reason.
 */
export function createPipelineApp(
  topology: Topology,
  props: AppProps = {},
  options: PipelineAppOptions = {},
): PipelineApp {
  const app = new App(props);
  const settings = parseSettings((key) => app.node.tryGetContext(key));
  const stack = new PipelineStack(app, stackName(settings), {
    topology,
    settings,
    description: `Content pipeline (${settings.stage}, ${settings.target}): outbox -> EventBridge -> inbox`,
    // Environment-agnostic on purpose, whatever CDK_DEFAULT_ACCOUNT and CDK_DEFAULT_REGION say (the
    // cdk CLI always sets them): synth needs no credentials and makes no context lookup (a stack
    // with an account would look up its availability zones), so it works offline and in CI, and
    // `cdk deploy` deploys to the account and region of the caller's credentials (AWS_REGION,
    // --profile), as for any environment-agnostic stack:
    // https://docs.aws.amazon.com/cdk/v2/guide/environments.html
    env: options.env,
    tags: { project: 'content-pipeline', stage: settings.stage },
  });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app), new ServerlessChecks(app));
  return { app, stack, settings };
}
