import { App, type AppProps, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks, ServerlessChecks } from 'cdk-nag';
import { PipelineStack } from './pipeline-stack';
import { type PipelineSettings, parseSettings } from './settings';

/** The app and the one stack in it, as `cdk synth` builds them and the infra tests inspect them. */
export interface PipelineApp {
  readonly app: App;
  readonly stack: PipelineStack;
  readonly settings: PipelineSettings;
}

/** The stack's name: one pipeline per stage in an account and region. */
export const stackName = (settings: Pick<PipelineSettings, 'stage'>): string =>
  `ContentPipeline-${settings.stage}`;

/**
 * Builds the CDK app from context (`-c stage=... -c target=...`, or `props.context` in tests),
 * with cdk-nag's AWS Solutions and Serverless packs registered as validation plugins: every
 * synth fails on a finding that is not acknowledged with a reason.
 */
export function createPipelineApp(props: AppProps = {}): PipelineApp {
  const app = new App(props);
  const settings = parseSettings((key) => app.node.tryGetContext(key));
  const stack = new PipelineStack(app, stackName(settings), {
    settings,
    description: `Content pipeline (${settings.stage}, ${settings.target}): outbox -> EventBridge -> inbox`,
    // Environment-agnostic on purpose: synth needs no credentials and no lookups, so it works offline.
    env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
    tags: { project: 'content-pipeline', stage: settings.stage },
  });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app), new ServerlessChecks(app));
  return { app, stack, settings };
}
