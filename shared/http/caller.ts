import type { APIGatewayProxyEvent } from 'aws-lambda';

/**
 * Who sent a request, as the platform vouches for it: never a value the caller writes in its
 * body. The tasks API records it as the reviewer of an approval and the withdrawer of a
 * withdrawal, so no caller acts in another's name.
 */
export type CallerIdentity = (
  event: Pick<APIGatewayProxyEvent, 'headers' | 'requestContext'>,
) => string | undefined;

/**
 * What API Gateway's IAM authorization vouches for (`requestContext.identity`): the caller's ARN
 * (`userArn`, "the Amazon Resource Name (ARN) of the effective user identified after
 * authentication") and its account. Of a role session only the role is the account's to say;
 * the session name after it is the one the caller gave AssumeRole (IAM's `aws:userid` of a role
 * session is `role-id:caller-specified-role-name`, and `user`/`caller` carry that same id), and
 * API Gateway passes no STS source identity, so nothing in the request holds a name of the person
 * that the caller could not have chosen.
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-mapping-template-reference.html#context-variable-reference
 * https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html (both read 2026-12-05)
 */
const arnShapes = {
  /** A role session: `assumed-role/<role name>/<session name>`. */
  assumedRole: /^arn:([\w-]+):sts::(\d{12}):assumed-role\/([\w+=,.@-]+)\/([\w+=,.@-]+)$/,
  /** A federated user of GetFederationToken: a name the IAM user who asked for it chose. */
  federated: /^arn:([\w-]+):sts::(\d{12}):federated-user\/([\w+=,.@-]+)$/,
} as const;

/** How a role session is recorded: the role's ARN (stable, the account's), then the caller-chosen session name. */
const roleSession = /^(arn:[\w-]+:iam::\d{12}:role\/[\w+=,.@-]+) \(session ([\w+=,.@-]+)\)$/;

/**
 * On AWS: the IAM principal API Gateway authenticated (IAM authorization on every method), as an
 * id no caller can make name another principal. An IAM user (or the root) is its ARN. A role
 * session is recorded as the role's ARN with the session name after it, marked as the session's
 * (`arn:aws:iam::123456789012:role/Reviewers (session alice)`): the role is what IAM authorized,
 * the session name is what the caller said, so two people sharing a role are told apart only as
 * far as the role's trust policy makes them use their own names (`sts:RoleSessionName`, or IAM
 * Identity Center, which sets the session name itself; docs/aws.md, "Who approves"). The role's
 * path is not in a session's ARN, so not in the id. A federated user is its ARN, and so is any
 * other shape API Gateway vouches for; no `userArn` at all is undefined (a 403).
 */
export const iamCaller: CallerIdentity = (event) => {
  const arn = event.requestContext?.identity?.userArn ?? undefined;
  if (!arn) return undefined;
  const session = arnShapes.assumedRole.exec(arn);
  if (!session) return arn;
  const [, partition, account, role, name] = session;
  return `arn:${partition}:iam::${account}:role/${role} (session ${name})`;
};

/**
 * The name a person reads for a recorded caller (what a notification carries rather than
 * the ARN): an IAM user's name, a role session's name with its role, a federated user's name,
 * the root as such; anything else (a local caller's name) as it is.
 */
export function callerDisplayName(caller: string): string {
  const user = /^arn:[\w-]+:iam::\d{12}:user\/(?:[^/]+\/)*([^/]+)$/.exec(caller);
  if (user?.[1]) return user[1];
  const session = roleSession.exec(caller);
  if (session?.[1] && session[2])
    return `${session[2]} (role ${session[1].slice(session[1].lastIndexOf('/') + 1)})`;
  const federated = arnShapes.federated.exec(caller);
  if (federated?.[3]) return federated[3];
  const root = /^arn:[\w-]+:iam::(\d{12}):root$/.exec(caller);
  if (root) return `the root user of account ${root[1]}`;
  return caller;
}

/**
 * The header the local server puts its configured caller in (`PIPELINE_CALLER`), replacing
 * whatever a client sent under that name. Only the local runtime reads it: on AWS a client
 * could send any header, so the Lambda handler trusts the request context alone.
 */
export const localCallerHeader = 'x-pipeline-caller';

/** Locally: the caller the local server vouches for in {@link localCallerHeader}. */
export const localHeaderCaller: CallerIdentity = (event) => {
  const value = Object.entries(event.headers ?? {}).find(
    ([name]) => name.toLowerCase() === localCallerHeader,
  )?.[1];
  return value || undefined;
};
