/**
 * The offline deploy rehearsal: synthesize the sandbox stack with the cdk CLI, as `cdk deploy` does, then run
 * every function's real bundle, with exactly the environment its template gives it, the way
 * Lambda runs it (its own process, `handler(event, context)`), against local stand-ins reached
 * through `AWS_ENDPOINT_URL_*`: the Data API endpoint over embedded PostgreSQL (each function
 * logging in with its own role's secret), the local bus, dynalite, s3rver, and in-memory SNS,
 * SQS, Lambda, Secrets Manager and CloudWatch. It walks the whole path (migrate, create and
 * approve a task, the nudged relay, the bus, every consumer, a sweep, the gauges, the ops API,
 * three kinds of redrive and the delivery audit finding and re-sending what a disabled rule
 * did not deliver), records every AWS call each function made, and checks each
 * against that function's role in the template: action, resource where the ARN resolves, and
 * the statement's conditions (the DynamoDB leading keys: the partition key values it names).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateTableCommand, type CreateTableCommandInput, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import pg from 'pg';
import { topology } from '../../functions/topology';
import { startDynalite } from '../../infra/local/dynamo';
import { FaultInjector, noFaults } from '../../infra/local/faults';
import { type BusEvent, LocalBus } from '../../infra/local/local-bus';
import { consumerServiceName } from '../../shared/consumers/contract';
import { queueBackoffMaxSeconds } from '../../shared/consumers/queue-delivery';
import { toProxyEvent } from '../../shared/http/proxy-event';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { type ConsumerName, consumerPolicyOf, type RuleSpec } from '../../shared/topology';
import { startAwsStandins } from '../support/aws';
import { CallRecorder } from '../support/aws/calls';
import { describeEventBridgeRequest } from '../support/aws/eventbridge';
import { startRecordingProxy } from '../support/aws/proxy';
import { startS3rver } from '../support/aws/s3rver';
import { cdkCliSynth } from '../support/cdk-cli';
import { startDataApiServer } from '../support/data-api-server';
import { startEmbeddedPostgres } from '../support/embedded-pg';
import { waitFor } from '../support/wait-for';
import { AsyncLambda, asyncInvokeConfigs, pumpQueue, type QueueMapping, queueMappings } from './async-lambda';
import { sdkClientsIn } from './bundle-clients';
import { playFirstDeploy } from './first-deploy';
import { FunctionProcess, type FunctionSpec, type InitError } from './functions';
import {
  allows,
  type CfnTemplate,
  conditioned,
  type RequestContext,
  resourcePolicyAllows,
  resourcePolicyStatements,
  roleStatements,
  TemplateResolver,
  unresolved,
} from './template';

const deployment = { region: 'us-east-1', account: '123456789012' };

/** Stands for the caller's own Allow when only a resource policy's Deny is judged. */
const allowAll = { effect: 'Allow', actions: ['*'], resources: ['*'] } as const;

/** What the rehearsal found; `deniedCalls` and `missingEnv` must be 0 and every step ok. */
export interface RehearsalReport {
  /** The command that wrote the assembly the rehearsal deployed (`npx cdk synth …`, with its environment). */
  readonly synthesizedBy: string;
  readonly functions: number;
  readonly awsCalls: number;
  readonly deniedCalls: number;
  /** Checks whose allowing statement had conditions, judged on the keys the request named. */
  readonly conditionChecks: number;
  readonly missingEnv: number;
  readonly denied: readonly { caller: string; action: string; resource: string; context?: RequestContext }[];
  readonly initErrors: readonly { function: string; error: InitError }[];
  readonly steps: readonly { step: string; ok: boolean; detail?: string }[];
  /** Per function: the bundle's size and SDK clients, its import (cold start) and its first invocation. */
  readonly functionsRun: Readonly<
    Record<
      string,
      { bundleBytes: number; sdkClients: string[]; initMs: number; firstInvokeMs: number | undefined }
    >
  >;
  /** The actions each function called, for docs/aws.md and for reading. */
  readonly actionsByFunction: Readonly<Record<string, readonly string[]>>;
  /** Each function's Powertools service name (`outbox-relay`, `consumer-index`, ...), by logical id. */
  readonly serviceNames: Readonly<Record<string, string>>;
}

export interface RehearsalOptions {
  readonly log?: (line: string) => void;
  /** Only start the functions and report their cold starts; walk no path. */
  readonly coldStartsOnly?: boolean;
}

/** A step's outcome check: throws with what was seen. */
function check(condition: unknown, what: string): asserts condition {
  if (!condition) throw new Error(what);
}

/**
 * How the rehearsal waits on the stand-ins and the functions' processes (another process each:
 * it can only read their state): a bound on a path that never completes, read every 100 ms.
 * The path takes seconds; cold starts beside other suites take several each.
 */
const rehearsalWait = { timeoutMs: 180_000, intervalMs: 100 } as const;

/** Runs the rehearsal; the report says what happened (it throws only when it could not start). */
export async function runRehearsal(options: RehearsalOptions = {}): Promise<RehearsalReport> {
  const log = options.log ?? (() => {});
  const cleanups: (() => Promise<void> | void)[] = [];
  const steps: { step: string; ok: boolean; detail?: string }[] = [];
  try {
    // The assembly `cdk deploy` would upload: the cdk CLI binary's own, as a user with
    // credentials runs it (the CLI sets CDK_DEFAULT_REGION and CDK_DEFAULT_ACCOUNT), never an
    // in-process App, whose environment no user has.
    const command = ['-c', 'stage=sandbox', '-c', 'alarmEmail=ops@example.com'];
    log(`synthesizing the sandbox stack with its bundles: npx cdk synth ${command.join(' ')}`);
    const synth = await cdkCliSynth(command, {
      CDK_DEFAULT_REGION: deployment.region,
      CDK_DEFAULT_ACCOUNT: deployment.account,
    });
    cleanups.push(() => synth.remove());
    if (synth.code !== 0) throw new Error(`${synth.command} failed (exit ${synth.code}):\n${synth.stderr}`);
    const template = synth.template<CfnTemplate>();
    const stackName = synth.stackName;
    // Queue URLs are the SQS stand-in's, known once it runs; the environments are resolved again then.
    let queueUrl: (name: string) => string = (name) => unresolved(`queue ${name}`);
    const resolver = new TemplateResolver(template, {
      ...deployment,
      stackName,
      queueUrl: (n) => queueUrl(n),
    });
    const env = (id: string) =>
      resolver.resolve(
        (
          template.Resources[id]?.Properties?.Environment as
            | { Variables?: Record<string, unknown> }
            | undefined
        )?.Variables ?? {},
      ) as Record<string, string>;

    // --- the functions the template deploys (ours: they carry the Powertools service name) ---
    const specs: FunctionSpec[] = resolver
      .resourcesOfType('AWS::Lambda::Function')
      .filter(([id]) => env(id).POWERTOOLS_SERVICE_NAME !== undefined)
      .map(([id, r]) => {
        const p = r.Properties ?? {};
        const asset = (p.Code as { S3Key: string }).S3Key.replace(/\.zip$/, '');
        return {
          logicalId: id,
          name: resolver.physicalName(id),
          arn: resolver.getAtt(id, 'Arn'),
          bundle: join(synth.outdir, `asset.${asset}`, 'index.mjs'),
          exportName: String(p.Handler).split('.').pop() ?? 'handler',
          environment: env(id),
          timeoutMs: Number(p.Timeout ?? 3) * 1_000,
          memoryMb: Number(p.MemorySize ?? 128),
          roleId: (p.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0],
        };
      });
    const byService = (service: string) => {
      const spec = specs.find((s) => s.environment.POWERTOOLS_SERVICE_NAME === service);
      if (!spec) throw new Error(`the template has no ${service} function`);
      return spec;
    };
    const consumerOf = (spec: FunctionSpec) => spec.environment.CONSUMER_NAME as ConsumerName | undefined;

    // --- PostgreSQL, with the master user Aurora's generated secret names ---
    log('starting PostgreSQL and the Data API endpoint');
    const server = await startEmbeddedPostgres();
    cleanups.push(() => server.stop());
    const clusterId = resolver.resourcesOfType('AWS::RDS::DBCluster')[0]?.[0] as string;
    const databaseName = byService('migrate').environment.DB_NAME as string;
    const secretValues = new Map<string, { username: string; password: string }>();
    for (const [id, secret] of resolver.resourcesOfType('AWS::SecretsManager::Secret')) {
      const generated = secret.Properties?.GenerateSecretString as
        | { SecretStringTemplate?: string }
        | undefined;
      const username = (JSON.parse(generated?.SecretStringTemplate ?? '{}') as { username?: string })
        .username;
      if (!username) throw new Error(`secret ${id} names no username`);
      secretValues.set(resolver.ref(id), { username, password: `pw-${randomUUID()}` });
    }
    const masterArn = byService('migrate').environment.DB_SECRET_ARN as string;
    const master = secretValues.get(masterArn);
    if (!master) throw new Error('the migrate function’s secret is not one of the template’s');
    // Aurora's master user owns the default database and may create roles; it is no superuser.
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    await admin.query(
      `CREATE ROLE ${master.username} LOGIN CREATEROLE CREATEDB PASSWORD '${master.password}'`,
    );
    await admin.query(`CREATE DATABASE ${databaseName} OWNER ${master.username}`);
    await admin.end();
    const masterUrl = new URL(server.url);
    masterUrl.username = master.username;
    masterUrl.password = master.password;
    masterUrl.pathname = `/${databaseName}`;
    const dataApi = await startDataApiServer(masterUrl.toString(), {
      resourceArn: resolver.getAtt(clusterId, 'DBClusterArn'),
      secrets: (arn) => secretValues.get(arn),
    });
    cleanups.push(() => dataApi.close());

    // --- DynamoDB (dynalite) with the template's tables, s3rver with its buckets ---
    log('starting dynalite, s3rver and the local bus');
    const dataDir = mkdtempSync(join(tmpdir(), 'rehearsal-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const dynamo = await startDynalite(join(dataDir, 'dynamo'));
    cleanups.push(() => dynamo.stop());
    const direct = new DynamoDBClient({
      endpoint: dynamo.endpoint,
      region: deployment.region,
      credentials: { accessKeyId: 'rehearsal', secretAccessKey: 'local' },
    });
    cleanups.push(() => direct.destroy());
    for (const [id, table] of resolver.resourcesOfType('AWS::DynamoDB::Table')) {
      const p = table.Properties ?? {};
      await direct.send(
        new CreateTableCommand({
          TableName: resolver.physicalName(id),
          KeySchema: p.KeySchema,
          AttributeDefinitions: p.AttributeDefinitions,
          GlobalSecondaryIndexes: p.GlobalSecondaryIndexes,
          BillingMode: 'PAY_PER_REQUEST',
        } as CreateTableCommandInput),
      );
    }
    const buckets = resolver.resourcesOfType('AWS::S3::Bucket').map(([id]) => resolver.physicalName(id));
    const s3 = await startS3rver({ buckets, directory: join(dataDir, 's3') });
    cleanups.push(() => s3.close());

    // --- the bus: the template's bus and rules, targets invoking the consumer functions ---
    const processes = new Map<string, FunctionProcess>();
    const byName = (name: string) => {
      const found = [...processes.values()].find((p) => p.spec.name === name || p.spec.arn === name);
      if (!found) throw new Error(`no function ${name}`);
      return found;
    };
    const busId = resolver.resourcesOfType('AWS::Events::EventBus')[0]?.[0] as string;
    const rules: RuleSpec[] = resolver
      .resourcesOfType('AWS::Events::Rule')
      .filter(([, r]) => r.Properties?.EventPattern !== undefined)
      .map(([id, r]) => ({
        name: resolver.physicalName(id),
        description: String(r.Properties?.Description ?? ''),
        pattern: r.Properties?.EventPattern as Record<string, unknown>,
        targets: ((r.Properties?.Targets ?? []) as { Arn: unknown }[]).map((t) => {
          // A consumer's queue: the one its function's environment names.
          const queueArn = resolver.resolveString(t.Arn);
          const target = specs.find((s) => s.environment.CONSUMER_QUEUE_ARN === queueArn);
          const consumer = target && consumerOf(target);
          if (!consumer) throw new Error(`rule ${id} targets no consumer's queue`);
          return consumer;
        }),
      }));
    // Every run of every function, however started: Lambda's Errors metric, for the alarms' judge.
    const functionRuns = new Map<string, { count: number; errors: number }>();
    const runFunction = async (name: string, event: unknown): Promise<unknown> => {
      const proc = byName(name);
      const seen = functionRuns.get(proc.spec.name) ?? { count: 0, errors: 0 };
      functionRuns.set(proc.spec.name, seen);
      seen.count++;
      try {
        return await proc.invoke(event);
      } catch (err) {
        seen.errors++;
        throw err;
      }
    };
    // EventBridge delivers a rule's match to its target, the consumer's queue: a SendMessage as
    // the events service, allowed only by the queue's policy for that rule (aws:SourceArn).
    const ruleIds = new Map(
      resolver.resourcesOfType('AWS::Events::Rule').map(([id]) => [resolver.physicalName(id), id] as const),
    );
    let deliverToQueue: ((consumer: ConsumerName, event: BusEvent) => Promise<void>) | undefined;
    const eventBridgeDenied: RehearsalReport['denied'][number][] = [];
    const bus = new LocalBus({
      busName: resolver.physicalName(busId),
      rules,
      dir: join(dataDir, 'bus'),
      maxRequestBytes: 256 * 1024,
      faults: new FaultInjector(noFaults),
      invoke: async (consumer, event: BusEvent) => {
        if (!deliverToQueue) throw new Error('SQS is not up yet');
        await deliverToQueue(consumer, event);
      },
      retry: () => ({ maxAttempts: 3, baseMs: 50, maxMs: 200, maxAgeMs: 60_000 }),
    });
    await bus.start();
    cleanups.push(() => bus.stop());

    // --- the stand-ins, all recording into one recorder ---
    log('starting the AWS stand-ins');
    const recorder = new CallRecorder(deployment);
    const events = await startRecordingProxy({
      service: 'events',
      backend: bus.endpoint,
      recorder,
      describe: describeEventBridgeRequest,
      // The local bus serves PutEvents; no other EventBridge call has anywhere to go.
    });
    cleanups.push(() => events.close());
    // Each queue as the template defines it: its visibility timeout and its redrive policy.
    const queueDefinitions = resolver.resourcesOfType('AWS::SQS::Queue').map(([id, q]) => {
      const redrive = q.Properties?.RedrivePolicy as
        | { deadLetterTargetArn: unknown; maxReceiveCount: number }
        | undefined;
      return {
        name: resolver.physicalName(id),
        visibilityTimeoutSeconds: Number(q.Properties?.VisibilityTimeout ?? 30),
        ...(redrive
          ? {
              redrive: {
                deadLetterQueue: resolver.resolveString(redrive.deadLetterTargetArn).split(':').pop() ?? '',
                maxReceiveCount: Number(redrive.maxReceiveCount),
              },
            }
          : {}),
      };
    });
    let sqsClockOffsetMs = 0;
    const standins = await startAwsStandins({
      recorder,
      backends: { dynamodb: dynamo.endpoint, s3: s3.endpoint, rdsData: dataApi.endpoint },
      sns: { topics: resolver.resourcesOfType('AWS::SNS::Topic').map(([id]) => resolver.ref(id)) },
      // A clock the rehearsal moves: a delayed message (DelaySeconds) is due without waiting for it.
      sqs: { queues: queueDefinitions, now: () => Date.now() + sqsClockOffsetMs, sentClock: Date.now },
      lambda: { functions: specs.map((s) => s.name) },
      secretsManager: {
        secrets: [...secretValues].map(([arn, login]) => ({
          arn,
          name: arn.split(':secret:')[1] ?? arn,
          secretString: JSON.stringify(login),
        })),
      },
      cloudwatch: {
        alarms: resolver
          .resourcesOfType('AWS::CloudWatch::Alarm')
          .map(([id]) => ({ name: resolver.physicalName(id), state: 'OK' as const })),
      },
    });
    cleanups.push(() => standins.close());
    queueUrl = (name) => standins.sqs.queueUrl(name);
    const inboxTable = byService('ops-api').environment.INBOX_TABLE_NAME as string;
    const inbox = new DynamoInboxOps(direct, {
      tableName: inboxTable,
      openIndexShards: topology.inbox.openIndexShards,
    });
    const lambdaAsync = new AsyncLambda({
      specs,
      configs: asyncInvokeConfigs(resolver, specs),
      run: runFunction,
      // Only the relay is invoked asynchronously now (a nudge): Lambda's minute between its
      // attempts is not waited for; its run lease, not the wait, keeps runs apart.
      retryWait: async () => undefined,
      sqsEndpoint: standins.env.AWS_ENDPOINT_URL_SQS as string,
      queueUrl: (name) => standins.sqs.queueUrl(name),
      region: deployment.region,
    });
    standins.lambda.setDispatcher((name, payload, type) =>
      type === 'Event' ? lambdaAsync.run(name, payload) : runFunction(name, payload),
    );
    const mappings = queueMappings(resolver, template);
    // Lambda's poller receives and deletes with the function's execution role
    // (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html#events-sqs-permissions).
    const pollerSqs = new Map<string, SQSClient>();
    const pump = (queue: string) => {
      const mapping = mappings.find((m) => m.queue === queue);
      if (!mapping) throw new Error(`no event source mapping reads ${queue}`);
      const spec = byName(mapping.functionName).spec;
      let sqs = pollerSqs.get(spec.logicalId);
      if (!sqs) {
        sqs = lambdaAsync.sqsAs(spec.logicalId);
        pollerSqs.set(spec.logicalId, sqs);
      }
      return pumpQueue(mapping, {
        sqs,
        queueUrl: standins.sqs.queueUrl(queue),
        queueArn: standins.sqs.queueArn(queue),
        region: deployment.region,
        invoke: runFunction,
      });
    };
    cleanups.push(() => {
      for (const sqs of pollerSqs.values()) sqs.destroy();
    });

    // EventBridge's deliveries to the consumers' queues, judged by each queue's policy as the
    // events service with the rule's ARN (it has no role: the queue policy's Allow is its only one).
    const consumerQueueName = (consumer: ConsumerName) => {
      const spec = specs.find((x) => consumerOf(x) === consumer);
      if (!spec) throw new Error(`no ${consumer} consumer`);
      const arn = spec.environment.CONSUMER_QUEUE_ARN ?? '';
      return arn.split(':').pop() ?? '';
    };
    const eventBridgeSqs = lambdaAsync.sqsAs('events.amazonaws.com');
    cleanups.push(() => eventBridgeSqs.destroy());
    deliverToQueue = async (consumer, event) => {
      const type = (event as { 'detail-type'?: string })['detail-type'];
      const rule = rules.find(
        (r) =>
          r.targets.includes(consumer) &&
          ((r.pattern['detail-type'] as string[] | undefined) ?? []).includes(type ?? ''),
      );
      const ruleId = rule && ruleIds.get(rule.name);
      if (!ruleId) throw new Error(`no rule routes ${type} to ${consumer}`);
      const queue = consumerQueueName(consumer);
      const queueArn = standins.sqs.queueArn(queue);
      const context = {
        'aws:SourceArn': [resolver.getAtt(ruleId, 'Arn')],
        'aws:SecureTransport': ['true'],
      };
      if (
        !resourcePolicyAllows(
          resourcePolicyStatements(resolver, queueArn),
          'Service:events.amazonaws.com',
          'sqs:SendMessage',
          queueArn,
          context,
        )
      ) {
        eventBridgeDenied.push({
          caller: 'events.amazonaws.com',
          action: 'sqs:SendMessage',
          resource: queueArn,
          context,
        });
        throw new Error(`the queue policy of ${queue} refuses EventBridge for ${rule.name}`);
      }
      await eventBridgeSqs.send(
        new SendMessageCommand({
          QueueUrl: standins.sqs.queueUrl(queue),
          MessageBody: JSON.stringify(event),
        }),
      );
    };

    // Each consumer's event source mapping polls its queue all the time, as Lambda's pollers do:
    // a message comes back (and is handed over) when its visibility ends. A hidden message's time
    // is compressed: once its consumer's record says it may be tried again (the bundle reads the
    // real clock, so that much is waited for, at most 5 s), the queue's clock moves past the hide.
    const consumerNames = () =>
      specs
        .map((x) => x.environment.CONSUMER_NAME as ConsumerName | undefined)
        .filter((c) => c !== undefined);
    const consumerQueues = consumerNames().map(consumerQueueName);
    let polling = true;
    // Not before the functions run (they start below, which resolves this).
    let functionsStarted = () => {};
    const started = new Promise<void>((resolve) => {
      functionsStarted = resolve;
    });
    const poller = (async () => {
      await started;
      while (polling) {
        let handed = 0;
        // A pump that fails is tried again on the next pass.
        for (const queue of consumerQueues)
          handed += await Promise.resolve()
            .then(() => pump(queue))
            .catch(() => 0);
        if (handed > 0) continue;
        const hidden = consumerQueues.flatMap((q) =>
          standins.sqs
            .messages(q)
            .filter((m) => m.inFlight)
            .map((m) => ({ ...m, queue: q })),
        );
        if (hidden.length > 0) {
          const dueAt = await Promise.all(
            hidden.map(async (m) => {
              const event = JSON.parse(m.body) as { detail?: { id?: unknown } };
              const consumer = consumerNames().find((c) => consumerQueueName(c) === m.queue);
              const eventId = event.detail?.id;
              if (!consumer || typeof eventId !== 'string') return 0;
              const record = await inbox.get({ consumer, eventId });
              return record?.status === 'FAILED'
                ? record.nextAttemptAt
                : record?.status === 'PROCESSING'
                  ? record.leaseUntil
                  : 0;
            }),
          );
          const wait = Math.min(5_000, Math.max(0, Math.max(...dueAt) - Date.now() + 5));
          // A wait on the real clock, and nothing else can work: the consumers' bundles run in
          // processes of their own and stamp their records with Date.now, as deployed; no clock
          // of the test's reaches them. Only the SQS stand-in's clock is the test's to move.
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
          sqsClockOffsetMs += (queueBackoffMaxSeconds + 1) * 1_000;
          continue;
        }
        // Nothing to hand over: the pause between a mapping's empty polls, as Lambda's pollers
        // ask again (their long poll); no step waits on it, they wait for the state it leads to.
        // A poll, not an event: what arrives is sent by other processes (the functions, the bus).
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })();
    cleanups.push(async () => {
      polling = false;
      functionsStarted();
      await poller;
    });

    // --- every function in its own process, as Lambda would start it ---
    log(`starting ${specs.length} functions`);
    const lambdaEnv = {
      AWS_REGION: deployment.region,
      AWS_DEFAULT_REGION: deployment.region,
      AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
      TZ: ':UTC',
      ...standins.env,
      AWS_ENDPOINT_URL_EVENTBRIDGE: events.endpoint,
      POWERTOOLS_LOG_LEVEL: 'WARN',
    };
    const initErrors: { function: string; error: InitError }[] = [];
    // The specs were resolved before the queues existed: resolve the environments again now.
    for (const spec of specs) {
      const ready = await FunctionProcess.start({ ...spec, environment: env(spec.logicalId) }, lambdaEnv);
      if ('initError' in ready) initErrors.push({ function: spec.logicalId, error: ready.initError });
      else {
        processes.set(spec.logicalId, ready.process);
        cleanups.push(() => ready.process.stop());
      }
    }

    functionsStarted();

    if (!options.coldStartsOnly && initErrors.length === 0) {
      const step = async (name: string, run: () => Promise<string | undefined>) => {
        try {
          const detail = await run();
          steps.push({ step: name, ok: true, ...(detail ? { detail } : {}) });
          log(`ok   ${name}${detail ? `: ${detail}` : ''}`);
        } catch (err) {
          steps.push({ step: name, ok: false, detail: err instanceof Error ? err.message : String(err) });
          log(`FAIL ${name}: ${err instanceof Error ? err.message : String(err)}`);
        }
      };
      await walkThePath({
        step,
        byService,
        processes,
        direct,
        resolver,
        standins,
        dataApi,
        specs,
        bus,
        rules,
        template,
        runFunction,
        functionRuns,
        asyncLambda: lambdaAsync,
        pump,
        mappings,
        consumerQueueName,
        advanceSqsClock: (ms) => {
          sqsClockOffsetMs += ms;
        },
      });
    }
    await standins.lambda.settled();
    await lambdaAsync.settled();

    // --- every call against the caller's role ---
    const callers = new Map(specs.map((s) => [s.logicalId, s]));
    const calls = recorder.calls().filter((c) => callers.has(c.caller));
    const denied: RehearsalReport['denied'][number][] = [...eventBridgeDenied];
    // Each table's partition key, by ARN: its values in a request are `dynamodb:LeadingKeys`.
    const partitionKeys = new Map(
      resolver
        .resourcesOfType('AWS::DynamoDB::Table')
        .map(([id, t]) => [
          resolver.getAtt(id, 'Arn'),
          ((t.Properties?.KeySchema ?? []) as { AttributeName: string; KeyType: string }[]).find(
            (k) => k.KeyType === 'HASH',
          )?.AttributeName,
        ]),
    );
    const contextOf = (call: (typeof calls)[number], resource: string): RequestContext => {
      const key = partitionKeys.get(resource);
      const items = (call.keyedItems ?? []).filter((i) => i.resource === resource);
      if (!key || items.length === 0) return {};
      return { 'dynamodb:LeadingKeys': [...new Set(items.map((i) => i.attributes[key] ?? ''))] };
    };
    let conditionChecks = 0;
    const actionsByFunction: Record<string, Set<string>> = {};
    for (const call of calls) {
      const spec = callers.get(call.caller) as FunctionSpec;
      const actions = actionsByFunction[spec.logicalId] ?? new Set<string>();
      actions.add(call.action);
      actionsByFunction[spec.logicalId] = actions;
      const statements = roleStatements(resolver, spec.roleId);
      for (const resource of call.resources) {
        const context = contextOf(call, resource);
        // A resource's own policy (the bus's) may deny what the role allows: judged with the
        // request's keys (PutEvents' sources) and the caller's role as aws:PrincipalArn.
        const onResource = resourcePolicyStatements(resolver, resource);
        const principal = { ...call.context, 'aws:PrincipalArn': [resolver.getAtt(spec.roleId, 'Arn')] };
        if (onResource.length > 0 && !allows([...onResource, allowAll], call.action, resource, principal))
          denied.push({ caller: call.caller, action: call.action, resource, context: principal });
        else if (!allows(statements, call.action, resource, context))
          denied.push({ caller: call.caller, action: call.action, resource, context });
        else if (Object.keys(context).length > 0 && conditioned(statements, call.action, resource))
          conditionChecks++;
      }
    }
    const functionsRun = Object.fromEntries(
      [...processes.values()].map((p) => [
        p.spec.logicalId,
        {
          bundleBytes: statSync(p.spec.bundle).size,
          sdkClients: sdkClientsIn(readFileSync(p.spec.bundle, 'utf8')),
          initMs: p.initMs,
          firstInvokeMs: p.firstInvokeMs,
        },
      ]),
    );
    return {
      synthesizedBy: synth.command,
      functions: specs.length,
      awsCalls: calls.length,
      deniedCalls: denied.length,
      conditionChecks,
      missingEnv: initErrors.reduce((n, e) => n + Math.max(1, e.error.fields?.length ?? 0), 0),
      denied,
      initErrors,
      steps,
      functionsRun,
      actionsByFunction: Object.fromEntries(
        Object.entries(actionsByFunction).map(([k, v]) => [k, [...v].sort()]),
      ),
      serviceNames: Object.fromEntries(
        specs.map((s) => [s.logicalId, s.environment.POWERTOOLS_SERVICE_NAME ?? s.logicalId]),
      ),
    };
  } finally {
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup();
      } catch {
        // Teardown of a local stand-in: nothing to report.
      }
    }
  }
}

interface PathContext {
  readonly step: (name: string, run: () => Promise<string | undefined>) => Promise<void>;
  readonly byService: (service: string) => FunctionSpec;
  readonly processes: ReadonlyMap<string, FunctionProcess>;
  readonly direct: DynamoDBClient;
  readonly resolver: TemplateResolver;
  readonly standins: Awaited<ReturnType<typeof startAwsStandins>>;
  readonly dataApi: Awaited<ReturnType<typeof startDataApiServer>>;
  readonly specs: readonly FunctionSpec[];
  /** The bus the template's rules run on, and those rules (by their physical names). */
  readonly bus: LocalBus;
  readonly rules: readonly RuleSpec[];
  readonly template: CfnTemplate;
  /** Runs a function by physical name, counted (Lambda's Errors). */
  readonly runFunction: (name: string, event: unknown) => Promise<unknown>;
  readonly functionRuns: ReadonlyMap<string, { readonly count: number; readonly errors: number }>;
  readonly asyncLambda: AsyncLambda;
  /** What an event source mapping does with its queue's visible messages now. */
  readonly pump: (queue: string) => Promise<number>;
  readonly mappings: readonly QueueMapping[];
  /** Moves the SQS stand-in's clock: delayed messages become visible. */
  readonly advanceSqsClock: (ms: number) => void;
  /** A consumer's queue, by name. */
  readonly consumerQueueName: (consumer: ConsumerName) => string;
}

/** The IAM principal the rehearsal's API calls come from (API Gateway's `requestContext.identity.userArn`). */
const reviewerArn = 'arn:aws:sts::123456789012:assumed-role/content-reviewer/rita';
/** What the tasks API records for that caller: the role, and the session name it chose (shared/http/caller.ts). */
const recordedReviewer = 'arn:aws:iam::123456789012:role/content-reviewer (session rita)';

/**
 * An API Gateway REST proxy event for `resource` (the stage's, so `resource` and
 * `pathParameters` are set as API Gateway sets them), from an IAM-authenticated caller.
 */
function apiEvent(method: string, path: string, resource: string, body?: unknown) {
  const plain = toProxyEvent(
    {
      method,
      url: path,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? null : JSON.stringify(body),
    },
    [{ resource, method }],
  );
  if (plain.resource !== resource) throw new Error(`${path} is not a path of ${resource}`);
  return {
    ...plain,
    requestContext: {
      ...plain.requestContext,
      identity: { ...plain.requestContext.identity, userArn: reviewerArn },
    },
  };
}

type ApiAnswer = { statusCode: number; body: string };
const bodyOf = (answer: unknown) =>
  JSON.parse((answer as ApiAnswer).body) as Record<string, unknown> & unknown[];

async function walkThePath(ctx: PathContext): Promise<void> {
  const { step, byService, processes, direct, resolver, standins } = ctx;
  const run = (service: string, event: unknown) => ctx.runFunction(byService(service).name, event);
  // notify's notifications: what it publishes to the topics its environment names (another
  // consumer may publish to topics of its own).
  const notifyTopics = new Set(
    Object.values(byService(consumerServiceName('notify')).environment).filter((v) =>
      /^arn:[\w-]+:sns:/.test(v),
    ),
  );
  const notificationsOf = (id: string) =>
    standins.sns.published.filter((m) => notifyTopics.has(m.topicArn) && m.message.includes(id));
  const inboxTable = byService('ops-api').environment.INBOX_TABLE_NAME as string;
  const inbox = new DynamoInboxOps(direct, {
    tableName: inboxTable,
    openIndexShards: topology.inbox.openIndexShards,
  });
  const inboxStore = new DynamoInboxStore(direct, {
    tableName: inboxTable,
    openIndexShards: topology.inbox.openIndexShards,
  });
  const consumers: ConsumerName[] = ctx.specs
    .map((s) => s.environment.CONSUMER_NAME as ConsumerName)
    .filter(Boolean);
  let taskId = '';
  let eventId = '';

  await step(
    "first deploy in CloudFormation's order (migrate, schedules firing at once, mappings): no alarm raised",
    async () => {
      const deploy = await playFirstDeploy({
        template: ctx.template,
        resolver,
        processes,
        invoke: ctx.runFunction,
        pumpMapping: (mappingId) => {
          const queueArn = resolver.resolveString(
            ctx.template.Resources[mappingId]?.Properties?.EventSourceArn,
          );
          return ctx.pump(queueArn.split(':').pop() ?? '');
        },
        runs: () => ctx.functionRuns,
        queueDepth: (queue) => ctx.standins.sqs.messages(queue).length,
        schemaReaders: ['outbox-relay', 'consumer-archive', 'tasks-api', 'ops-api'],
      });
      const version = await ownerQuery(ctx, 'SELECT max(version) AS v FROM schema_migrations');
      check(Number(version[0]?.v) >= 7, `schema version ${String(version[0]?.v)}`);
      check(
        deploy.unordered.length === 0,
        `may start before the schema exists: ${deploy.unordered.join(', ')}`,
      );
      const migrateAt = deploy.runs.findIndex((r) => r.startsWith('migrate'));
      // Nothing that reads the schema may start before it exists: the relay (a sweep, a wake-up)
      // would fail (relay-errors), and so would a consumer reading a task.
      const beforeSchema = deploy.runs
        .slice(0, migrateAt)
        .filter((r) => /-> (outbox-relay|consumer-archive)\b/.test(r));
      check(beforeSchema.length === 0, `ran before the schema existed: ${beforeSchema.join('; ')}`);
      check(
        deploy.raised.length === 0,
        `alarms raised: ${deploy.raised.map((a) => `${a.alarm} (${a.why})`).join('; ')}`,
      );
      return `${deploy.order.length} resources; ran ${deploy.runs.join(', ')}; 0 alarms raised`;
    },
  );

  await step('tasks API: create and approve (the approve nudges the relay)', async () => {
    const created = (await run(
      'tasks-api',
      apiEvent('POST', '/tasks', '/tasks', { title: 'Rehearsal', assignee: 'ana' }),
    )) as ApiAnswer;
    check(created.statusCode === 201, `create answered ${created.statusCode} ${created.body}`);
    taskId = String(bodyOf(created).taskId);
    const approved = (await run(
      'tasks-api',
      apiEvent('POST', `/tasks/${taskId}/approve`, '/tasks/{taskId}/approve', {}),
    )) as ApiAnswer;
    check(approved.statusCode === 200, `approve answered ${approved.statusCode} ${approved.body}`);
    eventId = String(bodyOf(approved).eventId);
    const task = (await run(
      'tasks-api',
      apiEvent('GET', `/tasks/${taskId}`, '/tasks/{taskId}'),
    )) as ApiAnswer;
    check(bodyOf(task).reviewer === recordedReviewer, `reviewer ${String(bodyOf(task).reviewer)}`);
    return `task ${taskId}, event ${eventId}, reviewer the caller's role and session`;
  });

  await step('relay publishes, the bus fans out, every consumer processes the event', async () => {
    await waitFor(
      async () =>
        Promise.all(
          consumers.map(async (c) => (await inbox.get({ consumer: c, eventId }))?.status ?? 'none'),
        ),
      (states) => states.every((s) => s === 'PROCESSED'),
      { ...rehearsalWait, what: 'consumer inbox states' },
    );
    const published = notificationsOf(eventId);
    check(published.length === 1, `${published.length} notifications`);
    return `${consumers.join(', ')} PROCESSED; 1 notification`;
  });

  await step(
    'tasks API: a pending task is found by GET /tasks and rejected; notify alone tells its assignee why',
    async () => {
      const created = (await run(
        'tasks-api',
        apiEvent('POST', '/tasks', '/tasks', { title: 'Rehearsal: rejected', assignee: 'ana' }),
      )) as ApiAnswer;
      check(created.statusCode === 201, `create answered ${created.statusCode} ${created.body}`);
      const pendingId = String(bodyOf(created).taskId);
      const listed = (await run(
        'tasks-api',
        apiEvent('GET', '/tasks?status=pending&limit=5', '/tasks'),
      )) as ApiAnswer;
      check(listed.statusCode === 200, `list answered ${listed.statusCode} ${listed.body}`);
      const ids = (bodyOf(listed).tasks as { taskId: string }[]).map((t) => t.taskId);
      check(ids.includes(pendingId), `the pending task is not listed: ${ids.join(', ')}`);
      const rejected = (await run(
        'tasks-api',
        apiEvent('POST', `/tasks/${pendingId}/reject`, '/tasks/{taskId}/reject', { reason: 'off brand' }),
      )) as ApiAnswer;
      check(rejected.statusCode === 200, `reject answered ${rejected.statusCode} ${rejected.body}`);
      const rejection = String(bodyOf(rejected).eventId);
      await waitFor(
        async () => (await inbox.get({ consumer: 'notify', eventId: rejection }))?.status ?? 'none',
        (state) => state === 'PROCESSED',
        { ...rehearsalWait, what: 'notify inbox state of the rejection' },
      );
      const sent = notificationsOf(rejection);
      check(
        sent.length === 1 && sent[0]?.subject === 'Rejected: Rehearsal: rejected',
        `${sent.length} notifications`,
      );
      const others = await Promise.all(
        consumers.filter((c) => c !== 'notify').map((c) => inbox.get({ consumer: c, eventId: rejection })),
      );
      check(
        others.every((r) => r === undefined),
        'a consumer the rejection is not routed to received it',
      );
      return `listed ${ids.length} pending, rejected ${pendingId}; notify PROCESSED, 1 notification`;
    },
  );

  await step('ops API: status, events and the task’s trace', async () => {
    const status = (await run('ops-api', apiEvent('GET', '/ops/status', '/ops/status'))) as ApiAnswer;
    check(status.statusCode === 200, `status answered ${status.statusCode} ${status.body}`);
    const events = (await run('ops-api', apiEvent('GET', '/ops/events?limit=5', '/ops/events'))) as ApiAnswer;
    check(events.statusCode === 200, `events answered ${events.statusCode} ${events.body}`);
    const trace = (await run(
      'ops-api',
      apiEvent('GET', `/ops/tasks/${taskId}/trace`, '/ops/tasks/{taskId}/trace'),
    )) as ApiAnswer;
    check(trace.statusCode === 200, `trace answered ${trace.statusCode} ${trace.body}`);
    const entries = (bodyOf(trace).events as { consumers: Record<string, { status: string } | null> }[])[0]
      ?.consumers;
    check(
      entries && Object.values(entries).every((e) => e === null || e.status === 'PROCESSED'),
      `trace ${trace.body}`,
    );
    const outbox = (bodyOf(status).outbox as { delivered: number }).delivered;
    return `outbox delivered ${outbox}; alarms ${Object.keys(bodyOf(status).alarms ?? {}).length}`;
  });

  await step('relay sweep: drains and wakes nothing (nothing is left)', async () => {
    const out = (await run('outbox-relay', {
      source: 'aws.events',
      'detail-type': 'Scheduled Event',
      detail: {},
    })) as {
      pending: number;
    };
    check(out.pending === 0, `pending ${out.pending}`);
    const queue = wakeQueueOf(ctx);
    check(ctx.standins.sqs.messages(queue).length === 0, `wake queue ${queue} not empty`);
    return `pending 0, ${queue} empty`;
  });

  await step(
    'a row backing off: the run sends a delayed wake-up to its queue, and the wake-up delivers it',
    async () => {
      const backingOff = crypto.randomUUID();
      await ownerQuery(
        ctx,
        `INSERT INTO outbox (event_id, event_type, aggregate_id, aggregate_version, payload, next_attempt_at)
       SELECT '${backingOff}', 'content.rehearsal-wake', aggregate_id, aggregate_version, payload,
              now() + interval '30 seconds'
         FROM outbox WHERE event_id = '${eventId}'`,
      );
      const out = (await run('outbox-relay', { source: 'aws.events', 'detail-type': 'Scheduled Event' })) as {
        pending: number;
        nextDueInMs: number;
      };
      check(out.pending === 1 && out.nextDueInMs > 0, `relay left ${JSON.stringify(out)}`);
      const queue = wakeQueueOf(ctx);
      const sent = ctx.standins.sqs.messages(queue);
      check(
        sent.length === 1 && JSON.parse(sent[0]?.body ?? '{}').wake === 'due',
        `wake queue ${JSON.stringify(sent)}`,
      );
      // The delay is over (made due here, not waited for); the event source mapping hands the message over.
      await ownerQuery(ctx, `UPDATE outbox SET next_attempt_at = now() WHERE event_id = '${backingOff}'`);
      const woken = (await run('outbox-relay', {
        Records: [{ eventSource: 'aws:sqs', messageId: sent[0]?.messageId, body: sent[0]?.body }],
      })) as { published: number; pending: number };
      check(woken.published === 1 && woken.pending === 0, `woken run ${JSON.stringify(woken)}`);
      return `DelaySeconds wake-up, then published ${woken.published}`;
    },
  );

  await step('inbox gauges read every consumer’s figures from the sparse index', async () => {
    const out = (await run('inbox-gauges', {
      source: 'aws.events',
      'detail-type': 'Scheduled Event',
    })) as { consumers: Record<string, { dead: number; oldestLeaseSeconds: number | null }> };
    check(
      consumers.every((c) => out.consumers[c]?.dead === 0 && out.consumers[c]?.oldestLeaseSeconds === null),
      `gauges ${JSON.stringify(out)}`,
    );
    return JSON.stringify(out);
  });

  /** Creates and approves a task; the approve nudges the relay, which publishes its event. */
  const approveNew = async (title: string) => {
    const created = (await run('tasks-api', apiEvent('POST', '/tasks', '/tasks', { title }))) as ApiAnswer;
    const id = String(bodyOf(created).taskId);
    const approved = (await run(
      'tasks-api',
      apiEvent('POST', `/tasks/${id}/approve`, '/tasks/{taskId}/approve', {}),
    )) as ApiAnswer;
    check(approved.statusCode === 200, `approve answered ${approved.statusCode} ${approved.body}`);
    return String(bodyOf(approved).eventId);
  };
  /** Every consumer's queue and queue DLQ empty: what the pollers were handed is done. */
  const queuesSettled = () =>
    waitFor(
      async () => consumers.flatMap((c) => standins.sqs.messages(ctx.consumerQueueName(c))).length,
      (n) => n === 0,
      { ...rehearsalWait, what: 'the consumers’ queues drained' },
    );
  const queueDeadLetters = (consumer: ConsumerName) => queueOf(ctx, `Consumer${consumer}DeadLetters`);

  await step(
    "a transient outage: notify's message comes back to its queue after each backoff and is handled once when SNS is back, nobody paged",
    async () => {
      // SNS down (503s, which the SDK and then the inbox treat as transient), then back.
      standins.sns.failNext(1_000_000, {
        code: 'ServiceUnavailable',
        message: 'Service unavailable',
        status: 503,
      });
      const failedBefore = standins.sns.failed;
      const outageEvent = await approveNew('Rehearsal: SNS outage');
      const during = await waitFor(
        async () => inbox.get({ consumer: 'notify', eventId: outageEvent }),
        (r) => r?.status === 'FAILED' && r.attempts >= 3,
        { ...rehearsalWait, what: 'notify retried through its queue three times' },
      );
      const queued = standins.sqs.messages(ctx.consumerQueueName('notify'));
      check(queued.length === 1, `notify queue holds ${queued.length} messages during the outage`);
      standins.sns.failNext(0);
      const failedCalls = standins.sns.failed - failedBefore;
      const after = await waitFor(
        async () => inbox.get({ consumer: 'notify', eventId: outageEvent }),
        (r) => r?.status === 'PROCESSED',
        { ...rehearsalWait, what: 'notify PROCESSED after the outage' },
      );
      await queuesSettled();
      const sent = notificationsOf(outageEvent);
      check(sent.length === 1, `${sent.length} notifications`);
      check(standins.sqs.messages(queueDeadLetters('notify')).length === 0, 'a dead letter');
      return `FAILED ${during?.attempts} times (${failedCalls} SNS calls failed), each a receive of its queue after its backoff; PROCESSED on attempt ${after?.attempts}; 1 notification, 0 dead letters`;
    },
  );

  await step(
    `a permanent failure ends DEAD after maxPermanentAttempts (${consumerPolicyOf(topology, 'notify').maxPermanentAttempts}), its message acknowledged, in no DLQ`,
    async () => {
      standins.sns.failNext(1_000_000, {
        code: 'AuthorizationError',
        message: 'not authorized to publish',
        status: 403,
      });
      const poisoned = await approveNew('Rehearsal: SNS refuses');
      const record = await waitFor(
        async () => inbox.get({ consumer: 'notify', eventId: poisoned }),
        (r) => r?.status === 'DEAD',
        { ...rehearsalWait, what: 'the notify record DEAD' },
      );
      await queuesSettled();
      standins.sns.failNext(0);
      const budget = consumerPolicyOf(topology, 'notify').maxPermanentAttempts;
      check(
        record?.lastError?.includes(`permanent failure ${budget} of at most ${budget}`),
        `DEAD for ${record?.lastError}`,
      );
      check(standins.sqs.messages(queueDeadLetters('notify')).length === 0, 'a dead letter');
      // The DEAD record is what pages someone (inbox-dead); its redrive goes through the queue.
      const redrive = (await run(
        'ops-api',
        apiEvent('POST', '/ops/inbox/notify/dead/redrive', '/ops/inbox/{consumer}/dead/redrive', {
          eventId: poisoned,
        }),
      )) as ApiAnswer;
      check(redrive.statusCode === 200, `inbox redrive answered ${redrive.statusCode} ${redrive.body}`);
      const redriven = await waitFor(
        async () => inbox.get({ consumer: 'notify', eventId: poisoned }),
        (r) => r?.status === 'PROCESSED',
        { ...rehearsalWait, what: 'the redriven notify record' },
      );
      await queuesSettled();
      return `DEAD at attempt ${record?.attempts} (${budget} permanent failures), queue and DLQ empty; redriven through the queue: ${redriven?.status}`;
    },
  );

  await step(
    "a function that fails before its inbox on every receive: its queue's DLQ takes the message after maxReceiveCount receives; the ops API lists it and redrives it to the queue",
    async () => {
      const spec = ctx.specs.find((x) => x.environment.CONSUMER_NAME === 'archive');
      check(spec, 'no archive function');
      // The function's role cannot touch its queue (a lost grant): its receipt check fails
      // before the inbox, every time; the poller, which receives, is not refused.
      standins.sqs.refuse('ChangeMessageVisibility', spec.logicalId, {
        code: 'AccessDenied',
        message: 'not authorized to perform sqs:ChangeMessageVisibility',
        status: 403,
      });
      const lost = await approveNew('Rehearsal: archive cannot reach its queue');
      const dlq = queueDeadLetters('archive');
      let letters: { messageId: string }[] = [];
      try {
        letters = await waitFor(
          async () => standins.sqs.messages(dlq),
          (ms) => ms.length === 1,
          { ...rehearsalWait, what: "the archive queue's DLQ holding the message" },
        );
      } finally {
        standins.sqs.refuse('ChangeMessageVisibility', spec.logicalId);
      }
      const record = await inbox.get({ consumer: 'archive', eventId: lost });
      check(record === undefined, `an archive record ${record?.status}: the inbox was reached`);
      const maxReceiveCount = Number(
        (
          resolver
            .resourcesOfType('AWS::SQS::Queue')
            .find(([id]) => resolver.physicalName(id) === ctx.consumerQueueName('archive'))?.[1].Properties
            ?.RedrivePolicy as { maxReceiveCount?: number } | undefined
        )?.maxReceiveCount,
      );
      const listed = (await run(
        'ops-api',
        apiEvent('GET', '/ops/dead-letters', '/ops/dead-letters'),
      )) as ApiAnswer;
      const letter = (bodyOf(listed) as unknown as { id: string; consumer: string; rule: string }[]).find(
        (l) => l.consumer === 'archive',
      );
      check(letter?.rule === 'consumer-queue', `dead letters ${listed.body}`);
      const redrive = (await run(
        'ops-api',
        apiEvent('POST', '/ops/dead-letters/redrive', '/ops/dead-letters/redrive', { all: true }),
      )) as ApiAnswer;
      check(redrive.statusCode === 200 && bodyOf(redrive).redriven === 1, `redrive ${redrive.body}`);
      const handled = await waitFor(
        async () => inbox.get({ consumer: 'archive', eventId: lost }),
        (r) => r?.status === 'PROCESSED',
        { ...rehearsalWait, what: 'the redriven archive record' },
      );
      await queuesSettled();
      check(standins.sqs.messages(dlq).length === 0, 'dead letter left');
      return `${letters.length} letter after ${maxReceiveCount} receives, listed as ${letter?.rule}; redriven to the queue, ${handled?.status}`;
    },
  );

  await step(
    'nothing but its queue hands a consumer an event: a forged direct invoke acts on nothing, a forged SendMessage by another role is refused',
    async () => {
      // A valid content.approved, as the bus carried the first approval, with a new event id.
      const stored = (await inbox.get({ consumer: 'index', eventId }))?.event as
        | { detail: Record<string, unknown> }
        | undefined;
      check(stored, 'no stored index event');
      const forgedId = crypto.randomUUID();
      const event = { ...stored, id: crypto.randomUUID(), detail: { ...stored.detail, id: forgedId } };
      const spec = ctx.specs.find((x) => x.environment.CONSUMER_NAME === 'index');
      check(spec, 'no index function');
      const queueArn = spec.environment.CONSUMER_QUEUE_ARN ?? '';
      // An SQS-shaped invoke with a made-up receipt handle, and the raw event.
      const sqsShaped = (await ctx.runFunction(spec.name, {
        Records: [
          {
            messageId: 'forged',
            receiptHandle: 'made-up',
            body: JSON.stringify(event),
            attributes: { ApproximateReceiveCount: '1' },
            messageAttributes: {},
            eventSource: 'aws:sqs',
            eventSourceARN: queueArn,
            awsRegion: 'us-east-1',
          },
        ],
      })) as { batchItemFailures?: { itemIdentifier: string }[] };
      check(
        sqsShaped.batchItemFailures?.[0]?.itemIdentifier === 'forged',
        `the forged record was not refused: ${JSON.stringify(sqsShaped)}`,
      );
      const raw = await ctx.runFunction(spec.name, event).then(
        () => 'answered',
        (err: Error) => `threw ${err.message.slice(0, 60)}`,
      );
      check(
        (await inbox.get({ consumer: 'index', eventId: forgedId })) === undefined,
        'the forged event reached the inbox',
      );
      // Another role of the account (the tasks API's) sending to the queue: the queue policy's Deny.
      const queueArnOf = standins.sqs.queueArn(ctx.consumerQueueName('index'));
      const statements = resourcePolicyStatements(resolver, queueArnOf);
      const tasksRole = ctx.specs.find((x) => x.environment.POWERTOOLS_SERVICE_NAME === 'tasks-api');
      const as = (roleId: string) => ({
        'aws:PrincipalArn': [resolver.getAtt(roleId, 'Arn')],
        'aws:SecureTransport': ['true'],
      });
      const opsRole = byService('ops-api');
      const refused = !allows(
        [...statements, allowAll],
        'sqs:SendMessage',
        queueArnOf,
        as(tasksRole?.roleId ?? ''),
      );
      const opsAllowed = allows([...statements, allowAll], 'sqs:SendMessage', queueArnOf, as(opsRole.roleId));
      check(refused, 'the queue policy lets the tasks API role send to the index queue');
      check(opsAllowed, 'the queue policy refuses the ops API role');
      return `SQS-shaped invoke reported failed, raw event ${raw}; no inbox record; tasks-api role denied SendMessage, ops-api allowed`;
    },
  );

  await step('redrive a dead outbox event: back to pending, the relay nudged, delivered again', async () => {
    const dead = await run('ops-api', apiEvent('GET', '/ops/outbox/dead', '/ops/outbox/dead'));
    check((dead as ApiAnswer).statusCode === 200, `dead list ${(dead as ApiAnswer).body}`);
    // Make the delivered event dead, as a relay that gave up would (through the owner's SQL).
    await ownerQuery(
      ctx,
      `UPDATE outbox SET status = 'dead', last_error = 'rehearsal' WHERE event_id = '${eventId}'`,
    );
    const redrive = (await run(
      'ops-api',
      apiEvent('POST', '/ops/outbox/dead/redrive', '/ops/outbox/dead/redrive', { eventId }),
    )) as ApiAnswer;
    check(redrive.statusCode === 200, `redrive answered ${redrive.statusCode} ${redrive.body}`);
    await standins.lambda.settled();
    const rows = await waitFor(
      () => ownerQuery(ctx, `SELECT status FROM outbox WHERE event_id = '${eventId}'`),
      (r) => r[0]?.status === 'delivered',
      { ...rehearsalWait, what: 'the redriven outbox row' },
    );
    return `outbox row ${rows[0]?.status}`;
  });

  await step(
    'redrive a dead letter from a rule DLQ: the consumer re-invoked, the message deleted',
    async () => {
      const dlq = resolver
        .resourcesOfType('AWS::SQS::Queue')
        .map(([id]) => resolver.physicalName(id))
        .find((name) => name.includes('Dlqcontentapprovedindex'));
      check(dlq, 'no DLQ of the content-approved rule for index');
      // A rule DLQ message is the event itself, with the error in attributes (eb-rule-dlq.html).
      const event = (await inbox.get({ consumer: 'index', eventId }))?.event;
      const sqs = new SQSClient({
        endpoint: standins.env.AWS_ENDPOINT_URL_SQS,
        region: 'us-east-1',
        credentials: { accessKeyId: 'rehearsal', secretAccessKey: 'local' },
      });
      try {
        await sqs.send(
          new SendMessageCommand({
            QueueUrl: standins.sqs.queueUrl(dlq),
            MessageBody: JSON.stringify(event),
            MessageAttributes: {
              ERROR_CODE: { DataType: 'String', StringValue: 'SDK_CLIENT_ERROR' },
              ERROR_MESSAGE: { DataType: 'String', StringValue: 'Rate exceeded' },
            },
          }),
        );
      } finally {
        sqs.destroy();
      }
      const redrive = (await run(
        'ops-api',
        apiEvent('POST', '/ops/dead-letters/redrive', '/ops/dead-letters/redrive', { all: true }),
      )) as ApiAnswer;
      check(
        redrive.statusCode === 200 && bodyOf(redrive).redriven === 1,
        `redrive ${redrive.statusCode} ${redrive.body}`,
      );
      await standins.lambda.settled();
      check(standins.sqs.messages(dlq).length === 0, `${standins.sqs.messages(dlq).length} messages left`);
      return 'redriven 1, queue empty';
    },
  );

  await step(
    'delivery audit: a rule disabled by hand; the audit reports its event for every consumer, the ops API re-sends it, the next run finds nothing missing',
    async () => {
      const approvedRule = ctx.rules.find((r) =>
        JSON.stringify(r.pattern['detail-type'] ?? []).includes('content.approved'),
      );
      check(approvedRule, 'no rule of the template routes content.approved');
      check(ctx.bus.disableRule(approvedRule.name), `cannot disable ${approvedRule.name}`);
      let missing = '';
      try {
        const created = (await run(
          'tasks-api',
          apiEvent('POST', '/tasks', '/tasks', { title: 'Unrouted', assignee: 'ana' }),
        )) as ApiAnswer;
        const id = String(bodyOf(created).taskId);
        const approved = (await run(
          'tasks-api',
          apiEvent('POST', `/tasks/${id}/approve`, '/tasks/{taskId}/approve', {}),
        )) as ApiAnswer;
        missing = String(bodyOf(approved).eventId);
        await standins.lambda.settled();
        await queuesSettled();
        await waitFor(
          () => ownerQuery(ctx, `SELECT status FROM outbox WHERE event_id = '${missing}'`),
          (r) => r[0]?.status === 'delivered',
          { ...rehearsalWait, what: 'the unrouted event delivered to the bus' },
        );
      } finally {
        ctx.bus.enableRule(approvedRule.name);
      }
      // Past the grace period, as the database tells it: every delivered row an hour older.
      await ownerQuery(
        ctx,
        "UPDATE outbox SET delivered_at = delivered_at - interval '1 hour' WHERE status = 'delivered'",
      );
      const tick = { source: 'aws.events', 'detail-type': 'Scheduled Event', detail: {} };
      const first = (await run('delivery-audit', tick)) as {
        found: Record<string, number>;
        undelivered: Record<string, number>;
      };
      check(
        consumers.every((c) => first.found[c] === 1 && first.undelivered[c] === 1),
        `first audit run ${JSON.stringify(first)}`,
      );
      const listing = (await run('ops-api', apiEvent('GET', '/ops/audit', '/ops/audit'))) as ApiAnswer;
      const findings = bodyOf(listing).findings as unknown as { eventId: string; consumer: string }[];
      check(
        listing.statusCode === 200 &&
          findings.length === consumers.length &&
          findings.every((f) => f.eventId === missing),
        `GET /ops/audit ${listing.statusCode} ${listing.body}`,
      );
      const redrive = (await run(
        'ops-api',
        apiEvent('POST', '/ops/audit/redrive', '/ops/audit/redrive', { all: true }),
      )) as ApiAnswer;
      check(
        redrive.statusCode === 200 && bodyOf(redrive).redriven === consumers.length,
        `redrive ${redrive.statusCode} ${redrive.body}`,
      );
      await standins.lambda.settled();
      await queuesSettled();
      await waitFor(
        async () =>
          Promise.all(
            consumers.map(
              async (c) => (await inbox.get({ consumer: c, eventId: missing }))?.status ?? 'none',
            ),
          ),
        (states) => states.every((st) => st === 'PROCESSED'),
        { ...rehearsalWait, what: 'the re-sent event in every inbox' },
      );
      const second = (await run('delivery-audit', tick)) as {
        cleared: number;
        undelivered: Record<string, number>;
      };
      check(
        second.cleared === consumers.length && consumers.every((c) => second.undelivered[c] === 0),
        `second audit run ${JSON.stringify(second)}`,
      );
      return `${missing}: found for ${consumers.join(', ')}, re-sent, cleared`;
    },
  );

  await step('redrive a DEAD inbox record: the stored event handed back, processed again', async () => {
    const record = await inbox.get({ consumer: 'index', eventId });
    check(record, 'no index record');
    await inboxStore.markDead(
      { consumer: 'index', eventId },
      { status: record.status, leaseOwner: record.leaseOwner },
      { now: Date.now(), reason: 'rehearsal', expiresAt: Math.floor(Date.now() / 1000) + 3600 },
    );
    const redrive = (await run(
      'ops-api',
      apiEvent('POST', '/ops/inbox/index/dead/redrive', '/ops/inbox/{consumer}/dead/redrive', { eventId }),
    )) as ApiAnswer;
    check(redrive.statusCode === 200, `redrive answered ${redrive.statusCode} ${redrive.body}`);
    await standins.lambda.settled();
    const after = await waitFor(
      async () => (await inbox.get({ consumer: 'index', eventId }))?.status,
      (s) => s === 'PROCESSED',
      { ...rehearsalWait, what: 'the redriven index record' },
    );
    return `index record ${after}`;
  });
}

/** A queue of the template by the start of its logical id, as the stand-in names it. */
function queueOf(ctx: PathContext, logicalIdPrefix: string): string {
  const found = ctx.resolver
    .resourcesOfType('AWS::SQS::Queue')
    .find(([id]) => id.startsWith(logicalIdPrefix));
  if (!found) throw new Error(`the template has no queue ${logicalIdPrefix}*`);
  return ctx.resolver.physicalName(found[0]);
}

/** The relay's wake queue, by its logical id (the template names it, the stand-in serves it). */
function wakeQueueOf(ctx: PathContext): string {
  const found = ctx.resolver
    .resourcesOfType('AWS::SQS::Queue')
    .find(([id]) => id.startsWith('RelayWakeQueue'));
  if (!found) throw new Error('the template has no relay wake queue');
  return ctx.resolver.physicalName(found[0]);
}

async function ownerQuery(ctx: PathContext, sql: string): Promise<Record<string, unknown>[]> {
  const { RDSDataClient, ExecuteStatementCommand } = await import('@aws-sdk/client-rds-data');
  const client = new RDSDataClient({
    endpoint: ctx.dataApi.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'rehearsal', secretAccessKey: 'local' },
  });
  try {
    const out = await client.send(
      new ExecuteStatementCommand({
        resourceArn: ctx.dataApi.resourceArn,
        secretArn: ctx.dataApi.secretArn,
        database: ctx.byService('migrate').environment.DB_NAME,
        sql,
        formatRecordsAs: 'JSON',
      }),
    );
    return out.formattedRecords ? (JSON.parse(out.formattedRecords) as Record<string, unknown>[]) : [];
  } finally {
    client.destroy();
  }
}
