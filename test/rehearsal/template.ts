/**
 * Reading a synthesized CloudFormation template the way a deployment would see it: resources'
 * physical names and ARNs (made-up but consistent: an account, a region, names from logical
 * ids), intrinsic functions resolved, and each function's role policies, so a rehearsal can
 * run the bundles with the environment the template gives them and check every AWS call
 * against the role the template gives them.
 */

export interface CfnResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
}

export interface CfnTemplate {
  readonly Resources: Record<string, CfnResource>;
}

/** Where the made-up deployment lives. */
export interface Deployment {
  readonly stackName: string;
  readonly region: string;
  readonly account: string;
  /** The URL a queue gets (the SQS stand-in's), by queue name. */
  readonly queueUrl: (name: string) => string;
}

/** A value the template refers to that this resolver cannot know (it never matches a recorded call). */
export const unresolved = (what: string) => `<unresolved:${what}>`;
const isUnresolved = (value: string) => value.includes('<unresolved:');

/** Resolves `Ref`, `Fn::GetAtt`, `Fn::Join`, `Fn::Sub`, `Fn::Select` and `Fn::Split` against a template. */
export class TemplateResolver {
  constructor(
    readonly template: CfnTemplate,
    readonly deployment: Deployment,
  ) {}

  private resource(id: string): CfnResource {
    const r = this.template.Resources[id];
    if (!r) throw new Error(`the template has no resource ${id}`);
    return r;
  }

  private arn(service: string, resource: string, regional = true): string {
    const { region, account } = this.deployment;
    return `arn:aws:${service}:${regional ? region : ''}:${service === 's3' ? '' : account}:${resource}`;
  }

  /** The physical name CloudFormation would give `id` (its own property when the template sets one). */
  physicalName(id: string): string {
    const r = this.resource(id);
    const p = r.Properties ?? {};
    const named = (key: string) => (p[key] === undefined ? undefined : this.resolveString(p[key]));
    switch (r.Type) {
      case 'AWS::Lambda::Function':
        return named('FunctionName') ?? id;
      case 'AWS::DynamoDB::Table':
        return named('TableName') ?? id;
      case 'AWS::S3::Bucket':
        return named('BucketName') ?? id.toLowerCase().slice(0, 63);
      case 'AWS::SQS::Queue':
        return named('QueueName') ?? id;
      case 'AWS::SNS::Topic':
        return named('TopicName') ?? id;
      case 'AWS::Events::EventBus':
      case 'AWS::Events::Rule':
        return named('Name') ?? id;
      case 'AWS::RDS::DBCluster':
        return named('DBClusterIdentifier') ?? id.toLowerCase();
      case 'AWS::CloudWatch::Alarm':
        return named('AlarmName') ?? id;
      default:
        return id;
    }
  }

  /** What `{"Ref": id}` gives. */
  ref(id: string): string {
    switch (id) {
      case 'AWS::Region':
        return this.deployment.region;
      case 'AWS::AccountId':
        return this.deployment.account;
      case 'AWS::Partition':
        return 'aws';
      case 'AWS::StackName':
        return this.deployment.stackName;
      case 'AWS::URLSuffix':
        return 'amazonaws.com';
      case 'AWS::NoValue':
        return '';
    }
    if (!this.template.Resources[id]) return unresolved(id);
    const r = this.resource(id);
    switch (r.Type) {
      case 'AWS::SNS::Topic':
        return this.arn('sns', this.physicalName(id));
      case 'AWS::SQS::Queue':
        return this.deployment.queueUrl(this.physicalName(id));
      case 'AWS::SecretsManager::Secret':
        return this.arn('secretsmanager', `secret:${id}-AbCdEf`);
      case 'AWS::SecretsManager::SecretTargetAttachment':
        return this.resolveString(r.Properties?.SecretId);
      default:
        return this.physicalName(id);
    }
  }

  /** What `{"Fn::GetAtt": [id, attribute]}` gives. */
  getAtt(id: string, attribute: string): string {
    if (!this.template.Resources[id]) return unresolved(`${id}.${attribute}`);
    const r = this.resource(id);
    const name = this.physicalName(id);
    const known: Record<string, Record<string, () => string>> = {
      'AWS::Lambda::Function': { Arn: () => this.arn('lambda', `function:${name}`) },
      'AWS::DynamoDB::Table': { Arn: () => this.arn('dynamodb', `table/${name}`) },
      'AWS::SQS::Queue': {
        Arn: () => this.arn('sqs', name),
        QueueUrl: () => this.deployment.queueUrl(name),
        QueueName: () => name,
      },
      'AWS::SNS::Topic': { TopicArn: () => this.ref(id), TopicName: () => name },
      'AWS::S3::Bucket': { Arn: () => `arn:aws:s3:::${name}` },
      'AWS::Events::EventBus': { Arn: () => this.arn('events', `event-bus/${name}`), Name: () => name },
      'AWS::Events::Rule': { Arn: () => this.arn('events', `rule/${name}`) },
      'AWS::IAM::Role': { Arn: () => `arn:aws:iam::${this.deployment.account}:role/${id}` },
      'AWS::KMS::Key': { Arn: () => this.arn('kms', `key/${id}`) },
      'AWS::Logs::LogGroup': { Arn: () => this.arn('logs', `log-group:${name}:*`) },
      'AWS::RDS::DBCluster': { DBClusterArn: () => this.arn('rds', `cluster:${name}`) },
      'AWS::CloudWatch::Alarm': { Arn: () => this.arn('cloudwatch', `alarm:${name}`) },
    };
    const value = known[r.Type]?.[attribute];
    return value ? value() : unresolved(`${id}.${attribute}`);
  }

  /** Resolves any template value (intrinsics inside objects and arrays too). */
  resolve(value: unknown): unknown {
    if (Array.isArray(value)) return value.map((v) => this.resolve(v));
    if (value === null || typeof value !== 'object') return value;
    const o = value as Record<string, unknown>;
    const keys = Object.keys(o);
    if (keys.length === 1) {
      const [key] = keys as [string];
      const arg = o[key];
      switch (key) {
        case 'Ref':
          return this.ref(String(arg));
        case 'Fn::GetAtt': {
          const [id, attribute] = Array.isArray(arg) ? arg : String(arg).split('.');
          return this.getAtt(String(id), String(attribute));
        }
        case 'Fn::Join': {
          const [sep, parts] = arg as [string, unknown[]];
          return (this.resolve(parts) as unknown[]).map(String).join(sep);
        }
        case 'Fn::Select': {
          const [index, list] = arg as [number, unknown];
          return (this.resolve(list) as unknown[])[Number(index)];
        }
        case 'Fn::Split': {
          const [sep, text] = arg as [string, unknown];
          return this.resolveString(text).split(sep);
        }
        case 'Fn::Sub': {
          const [text, vars] = Array.isArray(arg)
            ? (arg as [string, Record<string, unknown>])
            : [String(arg), {}];
          return text.replace(/\$\{([^}]+)\}/g, (_m, name: string) => {
            if (name in vars) return this.resolveString(vars[name]);
            const [id, attribute] = name.split('.');
            return attribute ? this.getAtt(id as string, attribute) : this.ref(id as string);
          });
        }
      }
    }
    return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, this.resolve(v)]));
  }

  resolveString(value: unknown): string {
    return String(this.resolve(value));
  }

  /** Every resource of `type`, by logical id. */
  resourcesOfType(type: string): [string, CfnResource][] {
    return Object.entries(this.template.Resources).filter(([, r]) => r.Type === type);
  }
}

/** A statement's `Condition`: operator -> condition key -> the values it allows. */
export type Conditions = Readonly<Record<string, Readonly<Record<string, readonly string[]>>>>;

/** What a request tells IAM beyond its action and resource: condition key -> its values. */
export type RequestContext = Readonly<Record<string, readonly string[]>>;

/** One IAM statement of a role, resolved. */
export interface ResolvedStatement {
  readonly effect: string;
  readonly actions: readonly string[];
  readonly resources: readonly string[];
  /** Absent when the statement has no `Condition`. */
  readonly conditions?: Conditions;
  /**
   * A resource policy's principals, as `AWS:<arn or *>` / `Service:<name>`; absent for a role's
   * statements (they are the role's).
   */
  readonly principals?: readonly string[];
}

/** The statements of every policy attached to a role (AWS::IAM::Policy and the role's inline policies). */
export function roleStatements(resolver: TemplateResolver, roleId: string): ResolvedStatement[] {
  const documents: unknown[] = [];
  for (const [, policy] of resolver.resourcesOfType('AWS::IAM::Policy')) {
    const roles = (policy.Properties?.Roles ?? []) as { Ref?: string }[];
    if (roles.some((r) => r.Ref === roleId)) documents.push(policy.Properties?.PolicyDocument);
  }
  const role = resolver.template.Resources[roleId];
  for (const inline of (role?.Properties?.Policies ?? []) as { PolicyDocument?: unknown }[]) {
    documents.push(inline.PolicyDocument);
  }
  return documents.flatMap((doc) =>
    (((doc as { Statement?: unknown[] } | undefined)?.Statement ?? []) as Record<string, unknown>[]).map(
      (st) => ({
        effect: String(st.Effect),
        actions: [st.Action].flat().map(String),
        resources: [resolver.resolve(st.Resource)].flat().map(String),
        ...(st.Condition === undefined ? {} : { conditions: resolveConditions(resolver, st.Condition) }),
      }),
    ),
  );
}

/** IAM's wildcard match: `*` any run of characters, `?` one; actions case-insensitively. */
function globMatch(pattern: string, value: string, ignoreCase: boolean): boolean {
  const source = pattern
    .split('')
    .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.+^${}()|[\]\\/]/g, '\\$&')))
    .join('');
  return new RegExp(`^${source}$`, ignoreCase ? 'i' : '').test(value);
}

function resolveConditions(resolver: TemplateResolver, condition: unknown): Conditions {
  return Object.fromEntries(
    Object.entries(condition as Record<string, Record<string, unknown>>).map(([operator, keys]) => [
      operator,
      Object.fromEntries(
        Object.entries(keys).map(([key, values]) => [key, [resolver.resolve(values)].flat().map(String)]),
      ),
    ]),
  );
}

/**
 * The set operators the rehearsal evaluates, as IAM does for a multivalued key: `ForAllValues`
 * holds when every value in the request matches one of the policy's (so also when the request
 * has none: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html).
 * Any other operator is refused outright rather than ignored: a condition the rehearsal cannot
 * read must not pass for one it checked.
 */
const setOperators: Record<string, (pattern: string, value: string) => boolean> = {
  'ForAllValues:StringEquals': (pattern, value) => pattern === value,
  'ForAllValues:StringLike': (pattern, value) => globMatch(pattern, value, false),
};

/**
 * The single-value operators: the key's value matches one of the policy's. A key the request
 * does not carry matches nothing, so a negated operator (`...Not...`) then holds
 * (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html).
 * A key with several values in the context (one PutEvents call's sources) holds when any does:
 * each entry is judged on its own.
 */
const singleOperators: Record<
  string,
  { match: (pattern: string, value: string) => boolean; negated: boolean }
> = {
  StringEquals: { match: (p, v) => p === v, negated: false },
  StringNotEquals: { match: (p, v) => p === v, negated: true },
  StringLike: { match: (p, v) => globMatch(p, v, false), negated: false },
  StringNotLike: { match: (p, v) => globMatch(p, v, false), negated: true },
  ArnEquals: { match: (p, v) => globMatch(p, v, false), negated: false },
  ArnLike: { match: (p, v) => globMatch(p, v, false), negated: false },
  ArnNotEquals: { match: (p, v) => globMatch(p, v, false), negated: true },
  ArnNotLike: { match: (p, v) => globMatch(p, v, false), negated: true },
  Bool: { match: (p, v) => p === v, negated: false },
};

/** Whether `conditions` hold for a request with `context`. */
export function conditionsHold(conditions: Conditions, context: RequestContext): boolean {
  return Object.entries(conditions).every(([operator, keys]) => {
    const set = setOperators[operator];
    const single = singleOperators[operator];
    if (!set && !single) throw new Error(`the rehearsal cannot evaluate the condition operator ${operator}`);
    return Object.entries(keys).every(([key, patterns]) => {
      const values = context[key] ?? [];
      if (set) return values.every((value) => patterns.some((pattern) => set(pattern, value)));
      const { match, negated } = single as (typeof singleOperators)[string];
      return (
        values.some((value) => patterns.some((pattern) => match(pattern, value)) !== negated) ||
        (values.length === 0 && negated)
      );
    });
  });
}

/** A resource policy statement's `Principal`, as `AWS:<arn or *>` / `Service:<name>` entries. */
function principalsOf(resolver: TemplateResolver, principal: unknown): string[] {
  if (principal === '*') return ['AWS:*'];
  return Object.entries((principal ?? {}) as Record<string, unknown>).flatMap(([kind, values]) =>
    [resolver.resolve(values)].flat().map((v) => `${kind}:${String(v)}`),
  );
}

/**
 * The statements of the resource policies the template puts on `resourceArn` (an event bus's
 * AWS::Events::EventBusPolicy, a queue's AWS::SQS::QueuePolicy), resolved: they are judged with
 * the caller's own.
 */
export function resourcePolicyStatements(
  resolver: TemplateResolver,
  resourceArn: string,
): ResolvedStatement[] {
  const busStatements = resolver
    .resourcesOfType('AWS::Events::EventBusPolicy')
    .map(([, p]) => p.Properties?.Statement as Record<string, unknown> | undefined)
    .filter((st): st is Record<string, unknown> => st !== undefined);
  const queueStatements = resolver
    .resourcesOfType('AWS::SQS::QueuePolicy')
    .flatMap(
      ([, p]) =>
        ((p.Properties?.PolicyDocument as { Statement?: Record<string, unknown>[] } | undefined)?.Statement ??
          []) as Record<string, unknown>[],
    );
  return [...busStatements, ...queueStatements]
    .map((st) => ({
      effect: String(st.Effect),
      actions: [st.Action].flat().map(String),
      resources: [resolver.resolve(st.Resource)].flat().map(String),
      ...(st.Condition === undefined ? {} : { conditions: resolveConditions(resolver, st.Condition) }),
      ...(st.Principal === undefined ? {} : { principals: principalsOf(resolver, st.Principal) }),
    }))
    .filter((st) => st.resources.some((r) => globMatch(r, resourceArn, false)));
}

/**
 * Whether a resource policy lets `principal` (`Service:<name>` or `AWS:<arn>`) do `action` on
 * `resource`: a statement naming it (or `AWS:*`, which IAM treats as every principal) allows, a
 * Deny naming it whose conditions hold refuses. For a service, which acts with no identity
 * policy, the resource policy's Allow is the only one.
 */
export function resourcePolicyAllows(
  statements: readonly ResolvedStatement[],
  principal: string,
  action: string,
  resource: string,
  context: RequestContext = {},
): boolean {
  const names = (st: ResolvedStatement) =>
    (st.principals ?? []).some((p) => p === principal || p === 'AWS:*');
  return allows(statements.filter(names), action, resource, context);
}

/** The statements about `action` on `resource` (their conditions not yet judged). */
function about(
  statements: readonly ResolvedStatement[],
  action: string,
  resource: string,
): ResolvedStatement[] {
  return statements.filter(
    (st) =>
      st.actions.some((a) => globMatch(a, action, true)) &&
      st.resources.some((r) => !isUnresolved(r) && globMatch(r, resource, false)),
  );
}

/**
 * Whether `statements` allow `action` on `resource` for a request with `context`; an
 * unresolved statement resource never matches, and a statement applies only where its
 * conditions hold.
 */
export function allows(
  statements: readonly ResolvedStatement[],
  action: string,
  resource: string,
  context: RequestContext = {},
): boolean {
  const matching = about(statements, action, resource).filter(
    (st) => st.conditions === undefined || conditionsHold(st.conditions, context),
  );
  return matching.some((st) => st.effect === 'Allow') && !matching.some((st) => st.effect === 'Deny');
}

/** Whether any statement about `action` on `resource` carries conditions (so a check judged them). */
export function conditioned(
  statements: readonly ResolvedStatement[],
  action: string,
  resource: string,
): boolean {
  return about(statements, action, resource).some((st) => st.conditions !== undefined);
}
