import * as z from 'zod';
import { topology } from '../../functions/topology';
import { type ConfigField, configError, configFields } from '../../shared/env';
import { prodGoalApprovalsPerSec } from './capacity/goal';

/** Where the stack deploys: real AWS (Aurora + Data API) or LocalStack (PostgreSQL by URL). */
export type DeployTarget = 'aws' | 'localstack';

/** What a stage changes: whether data survives a `cdk destroy` and whether deletion is guarded. */
export type Stage = 'sandbox' | 'prod';

/** A default that differs by stage. */
export interface ByStage<T> {
  readonly byStage: Readonly<Record<Stage, T>>;
}

/**
 * One setting of the pipeline: its context key (its name in `settingSpecs`, and the name of the
 * `ContentPipeline` prop that takes it), what it accepts, its default and what it does.
 */
export interface SettingSpec<T> {
  /** What it does, in a sentence or two: docs/aws.md's context table prints it. */
  readonly description: string;
  /**
   * Checks a given value: a string from `-c key=value`, a JSON value from cdk.json or a test,
   * or a construct prop.
   */
  readonly schema: z.ZodType<T>;
  /** The value when the key is not given (absent, or blank). */
  readonly default: T | ByStage<T>;
}

/** The stage when none is given: the one that keeps nothing when destroyed. */
const defaultStage: Stage = 'sandbox';

const setting = <T>(spec: SettingSpec<T>): SettingSpec<T> => spec;

/** The LocalStack default: the docker-compose PostgreSQL as the Lambda containers see it. */
export const defaultLocalStackDatabaseUrl = 'postgres://pipeline:pipeline@postgres:5432/pipeline';

// Context values arrive as strings from `-c`, as JSON values from cdk.json, tests and props.
const num = z.preprocess((v) => (typeof v === 'string' && v.trim() !== '' ? Number(v) : v), z.number());

/**
 * Every setting the pipeline takes, in one table: `parseSettings` reads them from CDK context,
 * `ContentPipeline` takes them as props, and docs/aws.md's context table is written from it
 * (`npm run docs:settings`; a test keeps the two equal).
 */
export const settingSpecs = {
  stage: setting<Stage>({
    description:
      'What survives a `cdk destroy` (prod keeps its tables, bucket, logs and a final database snapshot, with deletion protection; a sandbox keeps nothing), how long logs and backups are kept, and the prefix of every physical name, so stages deploy side by side.',
    schema: z.enum(['sandbox', 'prod']),
    default: defaultStage,
  }),
  target: setting<DeployTarget>({
    description:
      'Where the stack deploys: `aws` (Aurora Serverless v2, reached through the Data API) or `localstack` (the PostgreSQL at `databaseUrl`, through the pg adapter).',
    schema: z.enum(['aws', 'localstack']),
    default: 'aws',
  }),
  alarmEmail: setting<string | undefined>({
    description: 'Subscribed by email to the alarm topic (the owner confirms the subscription).',
    schema: z.email('must be an email address'),
    default: undefined,
  }),
  databaseUrl: setting<string>({
    description: 'LocalStack only: the PostgreSQL the functions reach (`DATABASE_URL`).',
    schema: z.string().regex(/^postgres(?:ql)?:\/\/\S+$/, 'must be a postgres:// URL'),
    default: defaultLocalStackDatabaseUrl,
  }),
  dbMinCapacity: setting<number>({
    description: 'Aurora Serverless v2 minimum capacity in ACUs; 0 lets the cluster auto-pause.',
    schema: num.pipe(z.number().min(0).max(256)),
    // Sandbox pauses when idle; prod keeps half an ACU warm so the first request is not a resume.
    default: { byStage: { sandbox: 0, prod: 0.5 } },
  }),
  dbMaxCapacity: setting<number>({
    description: 'Aurora Serverless v2 maximum capacity in ACUs (billed by use, not by the ceiling).',
    schema: num.pipe(z.number().min(1).max(256)),
    // Prod's ceiling is sized by `npm run capacity` for 10,000 approvals/s (the database CPU the
    // statements measure, at a quarter vCPU per ACU, needs about 80 ACU there). A sandbox stays small.
    default: { byStage: { sandbox: 2, prod: 128 } },
  }),
  dbReader: setting<boolean>({
    description:
      "Whether the Aurora cluster has a Serverless v2 reader in a second Availability Zone, in promotion tier 1 (it scales with the writer): Aurora promotes it to writer on a failover, and the Data API follows the cluster's writer endpoint. It doubles Aurora's compute bill.",
    schema: z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]),
    default: { byStage: { sandbox: false, prod: true } },
  }),
  tasksApiReservedConcurrency: setting<number | undefined>({
    description:
      "The tasks API's reserved concurrency, or `none`: executions no other function can take (consumers piling up behind a hung downstream cannot starve approvals) and the most the API runs at once. A reservation needs the account's concurrency quota above 100 plus every reservation (Lambda keeps 100 unreserved; a new account's quota may be 10, and any reservation then fails the deploy).",
    schema: z.union([
      z.literal('none').transform(() => undefined),
      num.pipe(z.number().int().min(1).max(10_000)),
    ]),
    // Prod: about twice what the goal rate needs (`npm run capacity`: 1,000 approvals/s x the
    // tasks API's execution time), and with the relay's within a default account's 1,000 less the 100
    // Lambda keeps unreserved. A sandbox must deploy on a new account.
    default: { byStage: { sandbox: undefined, prod: 400 } },
  }),
  relayReservedConcurrency: setting<number | undefined>({
    description:
      "The relay's reserved concurrency, or `none`: its draining runs (at most `topology.relay.maxRuns`), nudges and wake-ups always find room, and never take more. Needs the account's quota to hold it (see `tasksApiReservedConcurrency`); nudges past it are throttled and retried by Lambda, and a nudge only hints.",
    schema: z.union([
      z.literal('none').transform(() => undefined),
      num.pipe(z.number().int().min(1).max(100)),
    ]),
    // Prod: the run lease's 4 draining runs and room for nudges and wake-ups that find them busy.
    default: { byStage: { sandbox: undefined, prod: 10 } },
  }),
  prewarmApprovalsPerSecond: setting<number | undefined>({
    description:
      'The approval rate the inbox table and its index are pre-warmed for (DynamoDB warm throughput), or `none`: a new on-demand table takes 4,000 write units a second at once and grows by doubling, so without it a fresh stack throttles an approval stream of a few hundred a second. The write units come from the capacity model (`npm run capacity`); a table the default already covers gets none. Pre-warming is billed once, when the value is raised.',
    schema: z.union([
      z.literal('none').transform(() => undefined),
      num.pipe(z.number().int().min(1).max(100_000)),
    ]),
    // Prod: the goal rate the capacity test holds prod to (infra/aws/capacity/goal.ts).
    default: { byStage: { sandbox: undefined, prod: prodGoalApprovalsPerSec } },
  }),
  relaySweepMinutes: setting<number>({
    description:
      "The relay's safety sweep period in minutes: a run this often catches what a lost nudge left behind (the delivery audit runs with it).",
    schema: num.pipe(z.number().int().min(1).max(1440)),
    // Prod's Aurora never pauses (0.5 ACU minimum), so sweeping it every minute costs nothing;
    // a sandbox sweeps at the topology's period, long enough for an idle Aurora to pause.
    default: { byStage: { sandbox: Math.round(topology.relay.sweepSeconds / 60), prod: 1 } },
  }),
  dashboard: setting<boolean>({
    description: 'Whether the stack has a CloudWatch dashboard ($3 a month at list price).',
    schema: z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]),
    default: { byStage: { sandbox: false, prod: true } },
  }),
  apiRatePerSecond: setting<number>({
    description:
      "Requests a second each tasks route (create, list, read, approve, reject, withdraw) takes before API Gateway answers 429, burst twice that (at most the account's 5,000). Past 10,000 a second across all routes, raise the account's API Gateway quota first.",
    schema: num.pipe(z.number().int().min(1).max(100_000)),
    // Prod: about what Aurora's 128 ACU ceiling serves (`npm run capacity`), so the throttle
    // guards the database and the account's own API Gateway quota (10,000 requests/s by default,
    // raised on request: https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html)
    // binds first.
    default: { byStage: { sandbox: 100, prod: 15_000 } },
  }),
  opsRatePerSecond: setting<number>({
    description: "Requests a second each ops route (an operator's tools) takes, burst twice that.",
    schema: num.pipe(z.number().int().min(1).max(10_000)),
    default: 20,
  }),
  roleCredentialsVersion: setting<string>({
    description:
      "Bump it after putting new values in the database roles' secrets: the deploy then re-runs the migration, which resets the roles' passwords.",
    schema: z
      .union([z.string(), z.number()])
      .transform(String)
      .pipe(z.string().regex(/^[\w.-]{1,64}$/, 'must be a short version label')),
    default: '1',
  }),
};

/** A setting's name: its context key and its `ContentPipeline` prop. */
export type SettingKey = keyof typeof settingSpecs;

type SettingValue<S> = S extends SettingSpec<infer T> ? T : never;

/** Every setting with its value: what the app read from context, or a construct's props with defaults filled in. */
export type PipelineSettings = { readonly [K in SettingKey]: SettingValue<(typeof settingSpecs)[K]> };

/** The context keys the app reads; anything else in context is CDK's own (feature flags). */
export const contextKeys = Object.keys(settingSpecs) as readonly SettingKey[];

const isByStage = (value: unknown): value is ByStage<unknown> =>
  typeof value === 'object' && value !== null && 'byStage' in value;

/** A setting's default in `stage`. */
export function settingDefault<K extends SettingKey>(key: K, stage: Stage): PipelineSettings[K] {
  const d = settingSpecs[key].default;
  return (isByStage(d) ? d.byStage[stage] : d) as PipelineSettings[K];
}

const givenSchema = z.object(
  Object.fromEntries(contextKeys.map((k) => [k, settingSpecs[k].schema.optional()])) as {
    [K in SettingKey]: z.ZodOptional<z.ZodType<SettingValue<(typeof settingSpecs)[K]>>>;
  },
);

/**
 * Checks the settings given (by context key; a key absent, undefined or blank is unset) and
 * fills in the stage's defaults. Throws one PipelineError CONFIG naming every bad key (never
 * echoing a value: a URL may hold a password), so a typo fails the synth instead of deploying
 * a default. `what` names the source in the message ("CDK context", "ContentPipeline props").
 */
export function resolveSettings(
  given: Readonly<Partial<Record<SettingKey, unknown>>>,
  what: string,
): PipelineSettings {
  const set = Object.fromEntries(
    contextKeys
      .map((k) => [k, given[k]] as const)
      .filter(([, v]) => v !== undefined && !(typeof v === 'string' && v.trim() === '')),
  );
  const parsed = givenSchema.safeParse(set);
  if (!parsed.success) throw configError(what, configFields(parsed.error));
  const stage = parsed.data.stage ?? defaultStage;
  const settings = Object.fromEntries(
    // A key given as `none` parses to undefined: it is set (to nothing), not left to its default.
    contextKeys.map((k) => [k, k in set ? parsed.data[k] : settingDefault(k, stage)]),
  ) as PipelineSettings;
  // Checked with the defaults filled in: a sandbox's `dbMinCapacity=4` exceeds its default maximum.
  const crossed: ConfigField[] = [];
  if (settings.dbMinCapacity > settings.dbMaxCapacity) {
    crossed.push({
      path: 'dbMinCapacity',
      message: `must not exceed dbMaxCapacity (${settings.dbMinCapacity} > ${settings.dbMaxCapacity})`,
    });
  }
  if (crossed.length > 0) throw configError(what, crossed);
  return settings;
}

/**
 * Settings as props to give `ContentPipeline` again: a setting that may be `none` and is unset
 * (undefined) is given as `none`, so a prod stage told `-c relayReservedConcurrency=none` does not
 * get prod's default back.
 */
export function settingsAsProps(settings: PipelineSettings): Readonly<Partial<Record<SettingKey, unknown>>> {
  return Object.fromEntries(
    contextKeys.map((k) => [
      k,
      settings[k] === undefined && settingSpecs[k].schema.safeParse('none').success ? 'none' : settings[k],
    ]),
  );
}

/** Reads the app's settings from CDK context (`-c key=value`, cdk.json), checked as `resolveSettings` does. */
export function parseSettings(tryGetContext: (key: string) => unknown): PipelineSettings {
  return resolveSettings(Object.fromEntries(contextKeys.map((k) => [k, tryGetContext(k)])), 'CDK context');
}

/** The prefix of every physical name the stack sets itself, so stages deploy side by side. */
export const resourcePrefix = (settings: Pick<PipelineSettings, 'stage'>): string =>
  `content-pipeline-${settings.stage}`;

/** A default as docs/aws.md and the props' `@default` write it: `none` for unset, per stage where it differs. */
export function renderDefault(key: SettingKey): string {
  const text = (v: unknown) => (v === undefined ? 'none' : String(v));
  const d = settingSpecs[key].default;
  return isByStage(d) ? `sandbox ${text(d.byStage.sandbox)}, prod ${text(d.byStage.prod)}` : text(d);
}

/** docs/aws.md's context table: every setting, its default and what it does. */
export function contextTable(): string {
  const cell = (s: string) => s.replaceAll('|', '\\|');
  return [
    '| context key | default | what it does |',
    '|---|---|---|',
    ...contextKeys.map(
      (k) => `| \`${k}\` | ${cell(renderDefault(k))} | ${cell(settingSpecs[k].description)} |`,
    ),
  ].join('\n');
}
