import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { resourceConstructId } from '../../shared/consumers/resources';
import type { Topology } from '../../shared/topology';
import { AuroraDatabase } from './constructs/database';
import { alarmName } from './constructs/pipeline-alarms';
import { ContentPipeline, type ContentPipelineProps } from './content-pipeline';
import { type PipelineSettings, settingsAsProps } from './settings';

export interface PipelineStackProps extends StackProps {
  /** What the app read from context (`parseSettings`). */
  readonly settings: PipelineSettings;
  /** The pipeline this stack realizes: the project's (`functions/topology.ts`), or a test's variant. */
  readonly topology: Topology;
}

/**
 * The app's stack: a `ContentPipeline` with the settings from context, and the outputs an
 * operator needs (the ops CLI finds the API, the alarms and the rest by these output keys).
 */
export class PipelineStack extends Stack {
  public readonly pipeline: ContentPipeline;

  constructor(scope: Construct, id: string, props: PipelineStackProps) {
    super(scope, id, props);
    // Id `Default`: CDK leaves a construct of that id out of its children's logical ids
    // (https://docs.aws.amazon.com/cdk/api/v2/docs/constructs.Node.html#addr), so every resource
    // keeps the logical id it had when the stack built them itself, and an update replaces nothing.
    this.pipeline = new ContentPipeline(this, 'Default', {
      // Each value checked by resolveSettings again; `none` where a setting was given as nothing.
      ...(settingsAsProps(props.settings) as ContentPipelineProps),
      topology: props.topology,
    });
    this.addOutputs();
  }

  private addOutputs(): void {
    const p = this.pipeline;
    const out = (id: string, value: string, description: string) =>
      new CfnOutput(this, id, { value, description });
    out('ApiUrl', p.tasksApi.url, 'Tasks and ops API base URL (IAM/SigV4 auth; the ops CLI finds it here)');
    out('EventBusName', p.fanout.bus.eventBusName, 'Custom event bus the relay publishes to');
    out('RelayFunctionName', p.relay.function.functionName, 'Outbox relay function');
    if (p.database instanceof AuroraDatabase) {
      out('ClusterArn', p.database.cluster.clusterArn, 'Aurora cluster (Data API resource ARN)');
      out(
        'SecretArn',
        p.database.secret.secretArn,
        'Master database credentials (the migrate function only)',
      );
      out('DatabaseName', p.database.databaseName, 'Database name');
    }
    out('SchemaVersion', p.migration.schemaVersion, 'Highest applied migration');
    out('InboxTableName', p.inbox.table.tableName, 'Consumers inbox table');
    // Each consumer's table, topic and bucket: `ContentIndexTableName` for table `contentIndex`.
    for (const resources of p.consumerResources.values()) {
      for (const [key, resource] of resources) {
        out(
          `${resourceConstructId(key)}${resource.output.suffix}`,
          resource.output.value,
          resource.spec.description,
        );
      }
    }
    out('AlarmTopicArn', p.alarms.topic.topicArn, 'Alarm topic');
    out('AlarmNamePrefix', alarmName(this.stackName, ''), 'Every alarm of this stack starts with this');
    out(
      'ReviewerPolicyArn',
      p.access.reviewer.managedPolicyArn,
      'Attach to whoever reviews: the tasks routes only (create, list, read, approve, reject, withdraw)',
    );
    out(
      'OperatorPolicyArn',
      p.access.operator.managedPolicyArn,
      'Attach to whoever operates: the ops routes only (status, traces, dead lists, redrives)',
    );
    if (p.dashboard) out('DashboardUrl', p.dashboard.url, 'CloudWatch dashboard');
  }
}
