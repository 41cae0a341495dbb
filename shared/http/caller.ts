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
 * On AWS: the IAM principal API Gateway authenticated (IAM authorization on every method), as
 * its ARN (`requestContext.identity.userArn`: a user, or an assumed role with its session name).
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-mapping-template-reference.html#context-variable-reference
 */
export const iamCaller: CallerIdentity = (event) => event.requestContext?.identity?.userArn ?? undefined;

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
