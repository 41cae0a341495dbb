import { Aws, Stack, Validations } from 'aws-cdk-lib';
import type { CfnRestApi, RestApi } from 'aws-cdk-lib/aws-apigateway';
import { ManagedPolicy, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { apiStageName } from './tasks-api';

/** A route of the REST API, as the route tables name it (`/tasks/{taskId}/approve`). */
export interface ApiRoute {
  readonly resource: string;
  readonly method: string;
}

export interface ApiAccessProps {
  readonly api: RestApi;
  /** What a reviewer may call: the tasks API's routes (create, list, read, approve, reject, withdraw). */
  readonly reviewerRoutes: readonly ApiRoute[];
  /** What an operator may call: the ops API's routes (status, traces, dead lists, redrives). */
  readonly operatorRoutes: readonly ApiRoute[];
  /** Prefix of the policies' names (`content-pipeline-<stage>`), so stages deploy side by side. */
  readonly namePrefix: string;
}

/**
 * The execute-api resource of one route on the stage: path parameters become `*`
 * (https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-control-access-using-iam-policies-to-invoke-api.html).
 *
 * Partition, region and account are always the pseudo parameters, never the stack's own values:
 * `api.arnForExecuteApi` writes a stack's concrete region and account (which the cdk CLI always
 * sets, from CDK_DEFAULT_REGION and CDK_DEFAULT_ACCOUNT), so the policy, and with it cdk-nag's
 * finding and our acknowledgement of it, would differ with the environment synth runs in. Resolved
 * at deploy, both are the same ARN.
 */
export function routeArn(api: RestApi, route: ApiRoute): string {
  return `arn:${Aws.PARTITION}:execute-api:${Aws.REGION}:${Aws.ACCOUNT_ID}:${api.restApiId}/${routeResource(route)}`;
}

/** What follows the API id in a route's ARN: the stage, the method and the path, `*` for each parameter. */
const routeResource = (route: ApiRoute) => `${apiStageName}/${route.method}${routePath(route)}`;

const routePath = (route: ApiRoute) => route.resource.replace(/\{[^}]+\}/g, '*');

/**
 * Who may call what. Every method of the API needs IAM (SigV4), and IAM alone decides which
 * routes a principal may invoke: two managed policies, one per job. A reviewer's (the tasks
 * routes) never reaches the ops routes, whose dead lists hold whole payloads and whose redrives
 * re-run effects; an operator's (the ops routes) can read and redrive but never approve, and
 * the API records every approval under the caller's own identity. Attach one to a user, group
 * or role (README "Deploy", docs/aws.md); a principal with neither, or with a policy of its own that does
 * not name these routes, is refused with 403 by API Gateway.
 */
export class ApiAccess extends Construct {
  public readonly reviewer: ManagedPolicy;
  public readonly operator: ManagedPolicy;

  constructor(scope: Construct, id: string, props: ApiAccessProps) {
    super(scope, id);
    const policy = (name: string, description: string, routes: readonly ApiRoute[]) => {
      const managed = new ManagedPolicy(this, name, {
        managedPolicyName: `${props.namePrefix}-${name.toLowerCase()}`,
        description,
        statements: [
          new PolicyStatement({
            actions: ['execute-api:Invoke'],
            resources: routes.map((r) => routeArn(props.api, r)),
          }),
        ],
      });
      // cdk-nag names each resource with a "*" in it: one acknowledgement per route with a path parameter,
      // in the form routeArn writes in every environment.
      const apiId = Stack.of(this).getLogicalId(props.api.node.defaultChild as CfnRestApi);
      for (const route of routes.filter((r) => r.resource.includes('{'))) {
        Validations.of(managed).acknowledge({
          id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:<${apiId}>/${routeResource(route)}]`,
          reason:
            'execute-api resources name each route on this API and stage; a path parameter ({taskId}, {consumer}) is a "*" in its place, as API Gateway documents.',
        });
      }
      return managed;
    };
    this.reviewer = policy(
      'Reviewer',
      'Content pipeline: create, list, read, approve, reject and withdraw tasks (the tasks routes only)',
      props.reviewerRoutes,
    );
    this.operator = policy(
      'Operator',
      'Content pipeline: status, traces, dead lists and redrives (the ops routes only)',
      props.operatorRoutes,
    );
  }
}
