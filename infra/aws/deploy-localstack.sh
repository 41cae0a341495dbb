#!/usr/bin/env bash
# `npm run deploy:localstack`: plain `cdk deploy` against LocalStack (cdklocal breaks with
# current CDK CLIs). Start the services first: `docker compose up -d`.
# Extra arguments go to `cdk deploy`, e.g. `npm run deploy:localstack -- -c databaseUrl=postgres://...`.
set -euo pipefail
cd "$(dirname "$0")/../.."

# Everything below talks to LocalStack only: fixed test credentials, no profile, and the
# endpoint every AWS SDK (the CDK CLI's included) honours. `localhost.localstack.cloud` and its
# subdomains resolve to 127.0.0.1, so S3's virtual-hosted asset uploads work too.
export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://localhost.localstack.cloud:4566}"
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
unset AWS_PROFILE AWS_SESSION_TOKEN
export AWS_REGION="${AWS_REGION:-us-east-1}" AWS_DEFAULT_REGION="${AWS_REGION:-us-east-1}"
export CDK_DEFAULT_ACCOUNT=000000000000 CDK_DEFAULT_REGION="$AWS_REGION"

case "$AWS_ENDPOINT_URL" in
  http://localhost*|http://127.0.0.1*|http://localstack*|https://*.localstack.cloud*) ;;
  *) echo "refusing: AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL does not look like LocalStack" >&2; exit 1 ;;
esac

curl -fsS "$AWS_ENDPOINT_URL/_localstack/health" >/dev/null || {
  echo "LocalStack is not answering at $AWS_ENDPOINT_URL: run 'docker compose up -d' first" >&2
  exit 1
}

npx cdk bootstrap "aws://$CDK_DEFAULT_ACCOUNT/$AWS_REGION" -c target=localstack
npx cdk deploy -c target=localstack --require-approval never --outputs-file cdk.out/localstack-outputs.json "$@"
