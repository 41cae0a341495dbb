import { Duration, Lazy, RemovalPolicy, Validations } from 'aws-cdk-lib';
import {
  AccessLogFormat,
  AuthorizationType,
  type CfnStage,
  EndpointType,
  type IModel,
  type JsonSchema,
  LambdaIntegration,
  LogGroupLogDestination,
  MethodLoggingLevel,
  type RequestValidator,
  type Resource,
  ResponseType,
  RestApi,
} from 'aws-cdk-lib/aws-apigateway';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import * as z from 'zod';
import type { HttpRoute } from '../../../shared/http/router';
import { tasksApiRoutes } from '../../../shared/tasks/tasks-api';
import type { DatabaseAccess } from './database';
import { PipelineFunction } from './pipeline-function';

export interface TasksApiProps {
  /** The tasks API's own database role (`functionRoles.tasksApi`). */
  readonly database: DatabaseAccess;
  /** The REST API's name (stage-qualified, so stages deploy side by side). */
  readonly apiName: string;
  /** The relay the API nudges after each commit (`RELAY_FUNCTION_NAME`). */
  readonly relayFunction: IFunction;
  /**
   * Requests per second each tasks route takes (create, list, read, approve, reject, withdraw: each its own
   * limit), with a burst of twice that. The stage's settings (`apiRatePerSecond`). @default 100
   */
  readonly tasksRatePerSecond?: number;
  /**
   * Requests per second of every other method (the ops routes, which are an operator's tools),
   * burst twice that. @default 20
   */
  readonly defaultRatePerSecond?: number;
  /**
   * Executions reserved for the tasks API: no other function can take them, and it never runs
   * more (https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html, read
   * 2026-12-05). The stage's `tasksApiReservedConcurrency`. @default none
   */
  readonly reservedConcurrency?: number;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/** The API's one stage (part of its URL, its execute-api ARNs and its execution-log group's name). */
export const apiStageName = 'v1';
const stageName = apiStageName;

/**
 * A zod schema as the JSON Schema API Gateway validates with. API Gateway models are JSON
 * Schema draft 4 (https://docs.aws.amazon.com/apigateway/latest/developerguide/models-mappings-models.html),
 * which zod writes itself with `target: 'draft-04'`; `io: 'input'` describes what a caller may
 * send, not what parsing yields (https://zod.dev/json-schema). What zod checks in code
 * (refinements, transforms) has no JSON Schema and is left out, so the gateway refuses a subset
 * of what the function refuses, and the function still answers those with its field-by-field 400.
 */
const jsonSchemaOf = (schema: z.ZodType) => z.toJSONSchema(schema, { target: 'draft-04', io: 'input' });

/** Routes of a proxy-integrated API: each method needs IAM and is validated, path parameters required. */
export interface ProxyRoutes {
  /** The API's route table: its bodies become request models, its query keys declared parameters. */
  readonly routes: readonly HttpRoute[];
  readonly function: IFunction;
  /** Requests per second each of these routes takes (burst twice that); absent: the stage's default. */
  readonly ratePerSecond?: number;
}

/**
 * The tasks API: an API Gateway REST API (LocalStack's free tier has REST, not HTTP APIs)
 * whose every method needs IAM (SigV4) authorization, validates its request, is throttled
 * and access-logged, and proxies to the tasks-api function. The routes, their query parameters
 * and their request models come from the API's own route table (`tasksApiRoutes`), so the
 * gateway and the function cannot disagree.
 */
export class TasksApi extends Construct {
  public readonly function: PipelineFunction;
  public readonly api: RestApi;
  public readonly accessLogs: LogGroup;
  /** The stage's execution-log group (API Gateway's own name for it), with the stack's retention. */
  public readonly executionLogs: LogGroup;

  constructor(scope: Construct, id: string, props: TasksApiProps) {
    super(scope, id);
    this.defaultRate = props.defaultRatePerSecond ?? 20;
    this.function = new PipelineFunction(this, 'Function', {
      entry: 'functions/tasks-api/handler.ts',
      serviceName: 'tasks-api',
      description: 'Tasks API: create, list, read, approve, reject and withdraw content tasks',
      environment: { ...props.database.environment, RELAY_FUNCTION_NAME: props.relayFunction.functionName },
      memorySize: 512,
      // A resuming Aurora takes tens of seconds; API Gateway gives up at 29 s anyway.
      timeout: Duration.seconds(29),
      reservedConcurrentExecutions: props.reservedConcurrency,
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    props.database.grant(this.function);
    // The nudge invokes the unqualified function by name: no version or alias wildcard needed.
    this.function.addToRolePolicy(
      new PolicyStatement({
        actions: ['lambda:InvokeFunction'],
        resources: [props.relayFunction.functionArn],
      }),
    );

    this.accessLogs = new LogGroup(this, 'AccessLogs', {
      retention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    this.api = new RestApi(this, 'Api', {
      restApiName: props.apiName,
      description: 'Content pipeline tasks and ops API (IAM-authorized)',
      endpointTypes: [EndpointType.REGIONAL],
      // Execution and access logging need the account-level API Gateway CloudWatch role, which a
      // fresh account lacks. It is one setting per account and region, shared by every stage:
      // each stage sets it to a role of its own and RETAINS both on destroy, so destroying one
      // stage never leaves the other pointing at a deleted role.
      cloudWatchRole: true,
      cloudWatchRoleRemovalPolicy: RemovalPolicy.RETAIN,
      deployOptions: {
        stageName,
        // Every method not given its own limit (addRoutes' `ratePerSecond`).
        throttlingRateLimit: this.defaultRate,
        throttlingBurstLimit: this.defaultRate * 2,
        loggingLevel: MethodLoggingLevel.ERROR,
        // Request and response bodies hold task content: keep them out of the logs.
        dataTraceEnabled: false,
        tracingEnabled: true,
        metricsEnabled: true,
        accessLogDestination: new LogGroupLogDestination(this.accessLogs),
        accessLogFormat: AccessLogFormat.jsonWithStandardFields(),
      },
      defaultMethodOptions: { authorizationType: AuthorizationType.IAM },
    });

    // The gateway's own refusals answer in the API's error shape `{ "error": ... }`.
    for (const type of [ResponseType.BAD_REQUEST_BODY, ResponseType.BAD_REQUEST_PARAMETERS]) {
      this.api.addGatewayResponse(`${type.responseType}Response`, {
        type,
        statusCode: '400',
        templates: { 'application/json': '{"error":$context.error.messageString}' },
      });
    }
    // A throttled call says when to come back: HTTP's Retry-After (RFC 9110, 10.2.3), in seconds.
    // A route's token bucket refills at its rate, so one second is always enough for one more call.
    // https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-request-throttling.html
    this.api.addGatewayResponse('THROTTLEDResponse', {
      type: ResponseType.THROTTLED,
      statusCode: '429',
      responseHeaders: { 'Retry-After': "'1'" },
      templates: { 'application/json': '{"error":$context.error.messageString}' },
    });
    // Per-route limits join the stage's own method settings once every route is known.
    const stage = this.api.deploymentStage.node.defaultChild as CfnStage;
    // API Gateway writes execution logs to a group it names and creates itself, kept for ever:
    // create that group first, with the stack's retention, before the stage turns logging on.
    // https://docs.aws.amazon.com/apigateway/latest/developerguide/set-up-logging.html
    this.executionLogs = new LogGroup(this, 'ExecutionLogs', {
      logGroupName: `API-Gateway-Execution-Logs_${this.api.restApiId}/${stageName}`,
      retention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    stage.node.addDependency(this.executionLogs);
    const stageWide = stage.methodSettings;
    stage.methodSettings = Lazy.any({
      produce: () => [...(Array.isArray(stageWide) ? stageWide : []), ...this.routeThrottles],
    });

    this.validator = this.api.addRequestValidator('Validator', {
      validateRequestBody: true,
      validateRequestParameters: true,
    });
    this.addRoutes({
      routes: tasksApiRoutes,
      function: this.function,
      ratePerSecond: props.tasksRatePerSecond ?? 100,
    });

    Validations.of(this.api).acknowledge(
      {
        id: 'AwsSolutions-APIG3',
        reason:
          'Every method requires SigV4 (IAM) and the stage is throttled; a WAF web ACL ($5/month + rules) buys nothing more for callers who must hold IAM credentials.',
      },
      {
        id: 'AwsSolutions-COG4',
        reason:
          'The API authorizes with IAM (SigV4), not a Cognito user pool: callers are operators and services.',
      },
    );
    const cloudWatchRole = this.api.node.tryFindChild('CloudWatchRole');
    if (cloudWatchRole) {
      Validations.of(cloudWatchRole).acknowledge({
        id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]',
        reason:
          'The account-level role API Gateway uses to write execution logs; AWS maintains this service-role policy for exactly that.',
      });
    }
    Validations.of(this.function).acknowledge(
      {
        id: 'Serverless-LambdaAsyncFailureDestination',
        reason: 'Invoked synchronously by API Gateway only; the caller sees every failure.',
      },
      {
        id: 'Serverless-LambdaDLQ',
        reason: 'Invoked synchronously by API Gateway only; the caller sees every failure.',
      },
    );
  }

  /** The API's URL, stage included (`https://{id}.execute-api.{region}.amazonaws.com/v1/`). */
  get url(): string {
    return this.api.url;
  }

  private readonly validator: RequestValidator;
  private readonly models = new Map<string, IModel>();
  private readonly defaultRate: number;
  /** The stage's method settings of the routes added with a rate of their own. */
  private readonly routeThrottles: CfnStage.MethodSettingProperty[] = [];

  /**
   * Adds routes proxied to `routes.function` (the ops API uses this too, on the same API):
   * every method IAM-authorized, its path parameters required, its query parameters and headers
   * declared (required where the route's schemas require them), its body checked against the
   * request model generated from the route's zod body.
   */
  addRoutes(routes: ProxyRoutes): void {
    const integration = new LambdaIntegration(routes.function, { proxy: true, allowTestInvoke: false });
    for (const route of routes.routes) {
      const key = `${route.method} ${route.resource}`;
      const resource = this.resourceAt(route.resource);
      const pathParams = [...route.resource.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      const query = route.query ? jsonSchemaOf(route.query) : undefined;
      const requiredQuery = new Set(query?.required ?? []);
      // A proxy integration passes every header on, declared or not; declared ones are
      // documented on the method and checked by the validator when required.
      const headers = route.headers ? jsonSchemaOf(route.headers) : undefined;
      const requiredHeaders = new Set(headers?.required ?? []);
      resource.addMethod(route.method, integration, {
        authorizationType: AuthorizationType.IAM,
        requestValidator: this.validator,
        requestParameters: {
          ...Object.fromEntries(pathParams.map((p) => [`method.request.path.${p}`, true])),
          ...Object.fromEntries(
            Object.keys(query?.properties ?? {}).map((q) => [
              `method.request.querystring.${q}`,
              requiredQuery.has(q),
            ]),
          ),
          ...Object.fromEntries(
            Object.keys(headers?.properties ?? {}).map((h) => [
              `method.request.header.${h}`,
              requiredHeaders.has(h),
            ]),
          ),
        },
        requestModels: route.body ? { 'application/json': this.modelFor(key, route.body) } : undefined,
      });
      if (routes.ratePerSecond !== undefined) {
        this.routeThrottles.push({
          // A method setting's path is '/' and then the resource path with each '/' written '~1'.
          resourcePath: `/${route.resource.replaceAll('/', '~1')}`,
          httpMethod: route.method,
          throttlingRateLimit: routes.ratePerSecond,
          throttlingBurstLimit: Math.min(5_000, routes.ratePerSecond * 2),
        });
      }
    }
  }

  private modelFor(route: string, body: z.ZodType): IModel {
    const name = route.replace(/[^A-Za-z0-9]/g, '');
    let model = this.models.get(name);
    if (!model) {
      model = this.api.addModel(`${name}Body`, {
        contentType: 'application/json',
        // CDK's JsonSchema types the same draft-4 document; its `type` enum holds the draft's
        // type names, which are what zod writes. (CDK renames only `schema` and `ref` keys.)
        schema: jsonSchemaOf(body) as JsonSchema,
      });
      this.models.set(name, model);
    }
    return model;
  }

  private resourceAt(path: string): Resource {
    let resource = this.api.root as Resource;
    for (const part of path.split('/').filter(Boolean)) {
      resource = (resource.getResource(part) as Resource | undefined) ?? resource.addResource(part);
    }
    return resource;
  }
}
