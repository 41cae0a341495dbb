import { Duration, type RemovalPolicy, Validations } from 'aws-cdk-lib';
import {
  AccessLogFormat,
  AuthorizationType,
  EndpointType,
  type IModel,
  type JsonSchema,
  JsonSchemaType,
  LambdaIntegration,
  LogGroupLogDestination,
  MethodLoggingLevel,
  type Resource,
  ResponseType,
  RestApi,
} from 'aws-cdk-lib/aws-apigateway';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { tasksApiRoutes } from '../../../shared/tasks/tasks-api';
import type { PipelineDatabase } from './database';
import { PipelineFunction } from './pipeline-function';

export interface TasksApiProps {
  readonly database: PipelineDatabase;
  /** The relay the API nudges after each commit (`RELAY_FUNCTION_NAME`). */
  readonly relayFunction: IFunction;
  /** Steady-state requests per second for the whole stage. @default 20 */
  readonly throttlingRateLimit?: number;
  /** @default 40 */
  readonly throttlingBurstLimit?: number;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/**
 * JSON schemas API Gateway checks before invoking the function. Deliberately no stricter than
 * the function's own zod schemas (types, required fields, no unknown fields): anything that
 * passes here still gets the function's field-by-field 400.
 */
const bodySchemas: Readonly<Record<'create' | 'approve' | 'withdraw', JsonSchema>> = {
  create: {
    required: ['title'],
    properties: {
      title: { type: JsonSchemaType.STRING },
      body: { type: [JsonSchemaType.STRING, JsonSchemaType.NULL] },
      assignee: { type: [JsonSchemaType.STRING, JsonSchemaType.NULL] },
    },
  },
  approve: { required: ['approvedBy'], properties: { approvedBy: { type: JsonSchemaType.STRING } } },
  withdraw: {
    required: ['withdrawnBy'],
    properties: {
      withdrawnBy: { type: JsonSchemaType.STRING },
      reason: { type: [JsonSchemaType.STRING, JsonSchemaType.NULL] },
    },
  },
};

/** Which body model each POST route takes, keyed by the API's own route table. */
const bodyModelOf: Readonly<Record<string, keyof typeof bodySchemas>> = {
  'POST /tasks': 'create',
  'POST /tasks/{taskId}/approve': 'approve',
  'POST /tasks/{taskId}/withdraw': 'withdraw',
};

/**
 * The tasks API: an API Gateway REST API (LocalStack's free tier has REST, not HTTP APIs)
 * whose every method needs IAM (SigV4) authorization, validates its request, is throttled
 * and access-logged, and proxies to the tasks-api function. The routes come from the API's
 * own route table (`tasksApiRoutes`), so the gateway and the function cannot disagree.
 */
export class TasksApi extends Construct {
  public readonly function: PipelineFunction;
  public readonly api: RestApi;
  public readonly accessLogs: LogGroup;

  constructor(scope: Construct, id: string, props: TasksApiProps) {
    super(scope, id);
    this.function = new PipelineFunction(this, 'Function', {
      entry: 'functions/tasks-api/handler.ts',
      serviceName: 'tasks-api',
      description: 'Tasks API: create, read, approve and withdraw content tasks',
      environment: { ...props.database.environment, RELAY_FUNCTION_NAME: props.relayFunction.functionName },
      memorySize: 512,
      // A resuming Aurora takes tens of seconds; API Gateway gives up at 29 s anyway.
      timeout: Duration.seconds(29),
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    props.database.grantAccess(this.function);
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
      restApiName: 'content-pipeline-tasks',
      description: 'Content pipeline tasks API (IAM-authorized)',
      endpointTypes: [EndpointType.REGIONAL],
      // Execution logging needs the account-level API Gateway CloudWatch role.
      cloudWatchRole: true,
      deployOptions: {
        stageName: 'v1',
        throttlingRateLimit: props.throttlingRateLimit ?? 20,
        throttlingBurstLimit: props.throttlingBurstLimit ?? 40,
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

    const validator = this.api.addRequestValidator('Validator', {
      validateRequestBody: true,
      validateRequestParameters: true,
    });
    const models = new Map<string, IModel>();
    const modelFor = (name: keyof typeof bodySchemas): IModel => {
      let model = models.get(name);
      if (!model) {
        model = this.api.addModel(`${name}Body`, {
          contentType: 'application/json',
          schema: { type: JsonSchemaType.OBJECT, additionalProperties: false, ...bodySchemas[name] },
        });
        models.set(name, model);
      }
      return model;
    };

    const integration = new LambdaIntegration(this.function, { proxy: true, allowTestInvoke: false });
    for (const route of tasksApiRoutes) {
      const resource = this.resourceAt(route.resource);
      const pathParams = [...route.resource.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      const model = bodyModelOf[`${route.method} ${route.resource}`];
      resource.addMethod(route.method, integration, {
        authorizationType: AuthorizationType.IAM,
        requestValidator: validator,
        requestParameters: Object.fromEntries(pathParams.map((p) => [`method.request.path.${p}`, true])),
        requestModels: model ? { 'application/json': modelFor(model) } : undefined,
      });
    }

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

  private resourceAt(path: string): Resource {
    let resource = this.api.root as Resource;
    for (const part of path.split('/').filter(Boolean)) {
      resource = (resource.getResource(part) as Resource | undefined) ?? resource.addResource(part);
    }
    return resource;
  }
}
