import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { CloudWatchClient, DescribeAlarmsCommand, SetAlarmStateCommand } from '@aws-sdk/client-cloudwatch';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { runCli } from '../../infra/ops-tools/cli/cli';
import type { FetchLike } from '../../infra/ops-tools/cli/cli-client';

const cloudFormation = mockClient(CloudFormationClient);
const cloudWatch = mockClient(CloudWatchClient);
const apiUrl = 'https://abc123defg.execute-api.eu-west-1.amazonaws.com/v1/';
const stackName = 'ContentPipeline-sandbox';
const credentials = { AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'secret' };

beforeEach(() => {
  cloudFormation.reset();
  cloudWatch.reset();
  cloudFormation.on(DescribeStacksCommand, { StackName: stackName }).resolves({
    Stacks: [
      {
        StackName: stackName,
        CreationTime: new Date(),
        StackStatus: 'CREATE_COMPLETE',
        Outputs: [
          { OutputKey: 'ApiUrl', OutputValue: apiUrl },
          { OutputKey: 'AlarmNamePrefix', OutputValue: `${stackName}-` },
          { OutputKey: 'AlarmTopicArn', OutputValue: 'arn:aws:sns:eu-west-1:123456789012:alarms' },
        ],
      },
    ],
  });
});

async function run(
  argv: string[],
  fetch: FetchLike = async () => new Response('{}'),
  env: Record<string, string> = credentials,
) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    fetch,
    env,
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  });
  return { code, stdout, stderr };
}

describe('the ops CLI against a deployed stack (--stack)', () => {
  it('finds the API from the stack outputs and signs every request with SigV4 for that region', async () => {
    const seen: { url: string; authorization: string | null }[] = [];
    const fetch: FetchLike = async (url, init) => {
      seen.push({ url, authorization: new Headers(init?.headers).get('authorization') });
      return new Response(JSON.stringify([]), { headers: { 'content-type': 'application/json' } });
    };
    for (const argv of [
      ['--stack', stackName, 'outbox', 'dead'],
      ['--stack', stackName, 'inbox', 'dead', '--consumer', 'notify'],
      ['--stack', stackName, 'dead-letters'],
    ]) {
      expect((await run(argv, fetch)).code).toBe(0);
    }
    expect(seen.map((s) => s.url)).toEqual([
      `${apiUrl}ops/outbox/dead`,
      `${apiUrl}ops/inbox/notify/dead`,
      `${apiUrl}ops/dead-letters`,
    ]);
    for (const s of seen)
      expect(s.authorization).toMatch(/Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/execute-api\/aws4_request/);
  });

  it('says which stack it could not read, and refuses --stack with --url', async () => {
    const missing = await run(['--stack', 'Nope', 'status']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/cannot read stack Nope|stack Nope not found/);
    const both = await run(['--stack', stackName, '--url', 'http://127.0.0.1:3000', 'status']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("option '--url <url>' cannot be used with option '--stack <name>'");
  });

  it('alarms test sets the chosen alarm to ALARM and tells the user to expect the email', async () => {
    cloudWatch.on(DescribeAlarmsCommand).resolves({
      MetricAlarms: [
        { AlarmName: `${stackName}-oldest-pending-age` },
        { AlarmName: `${stackName}-relay-silent` },
      ],
    });
    cloudWatch.on(SetAlarmStateCommand).resolves({});
    const { code, stdout } = await run(['--stack', stackName, 'alarms', 'test', '--alarm', 'relay-silent']);
    expect(code).toBe(0);
    expect(cloudWatch.commandCalls(DescribeAlarmsCommand)[0]?.args[0].input.AlarmNamePrefix).toBe(
      `${stackName}-`,
    );
    expect(cloudWatch.commandCalls(SetAlarmStateCommand)[0]?.args[0].input).toMatchObject({
      AlarmName: `${stackName}-relay-silent`,
      StateValue: 'ALARM',
    });
    expect(stdout).toContain('Expect an ALARM email');
    expect(stdout).toContain(
      'aws sns list-subscriptions-by-topic --topic-arn arn:aws:sns:eu-west-1:123456789012:alarms',
    );
  });

  it('alarms test defaults to relay-errors (it re-evaluates within a minute), names the alarms it knows otherwise, and needs --stack', async () => {
    cloudWatch.on(DescribeAlarmsCommand).resolves({
      MetricAlarms: [
        { AlarmName: `${stackName}-relay-errors`, StateValue: 'OK', TreatMissingData: 'notBreaching' },
      ],
    });
    cloudWatch.on(SetAlarmStateCommand).resolves({});
    const { code, stdout } = await run(['--stack', stackName, 'alarms', 'test']);
    expect(code).toBe(0);
    expect(cloudWatch.commandCalls(SetAlarmStateCommand).map((c) => c.args[0].input.StateValue)).toEqual([
      'ALARM',
    ]);
    expect(cloudWatch.commandCalls(SetAlarmStateCommand)[0]?.args[0].input.AlarmName).toBe(
      `${stackName}-relay-errors`,
    );
    expect(stdout).toContain('and an OK email when CloudWatch next evaluates it');
    expect(stdout).toContain(
      `describe-alarm-history --alarm-name ${stackName}-relay-errors --history-item-type Action`,
    );
    const unknown = await run(['--stack', stackName, 'alarms', 'test', '--alarm', 'nope']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('its alarms: relay-errors');
    const local = await run(['alarms', 'test']);
    expect(local.code).toBe(2);
    expect(local.stderr).toContain('needs --stack');
  });

  it('alarms test sets an alarm already in ALARM to OK first (CloudWatch notifies only on a change), and warns when it keeps its state', async () => {
    cloudWatch.on(DescribeAlarmsCommand).resolves({
      MetricAlarms: [
        { AlarmName: `${stackName}-outbox-dead`, StateValue: 'ALARM', TreatMissingData: 'ignore' },
      ],
    });
    cloudWatch.on(SetAlarmStateCommand).resolves({});
    const { code, stdout } = await run(['--stack', stackName, 'alarms', 'test', '--alarm', 'outbox-dead']);
    expect(code).toBe(0);
    expect(cloudWatch.commandCalls(SetAlarmStateCommand).map((c) => c.args[0].input.StateValue)).toEqual([
      'OK',
      'ALARM',
    ]);
    expect(stdout).toContain('set to OK first');
    expect(stdout).toContain(
      `aws cloudwatch set-alarm-state --alarm-name ${stackName}-outbox-dead --state-value OK`,
    );
  });

  it('--region and --profile set the CloudFormation client and the signing credentials', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-profile-'));
    try {
      // The SDK reads the profile files named by the process environment.
      const file = join(dir, 'credentials');
      writeFileSync(file, '[ops]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = profile-secret\n');
      vi.stubEnv('AWS_SHARED_CREDENTIALS_FILE', file);
      vi.stubEnv('AWS_CONFIG_FILE', join(dir, 'none'));
      const seen: (string | null)[] = [];
      const fetch: FetchLike = async (_url, init) => {
        seen.push(new Headers(init?.headers).get('authorization'));
        return new Response('[]', { headers: { 'content-type': 'application/json' } });
      };

      const r = await run(
        ['--stack', stackName, '--region', 'ap-south-1', '--profile', 'ops', 'outbox', 'dead'],
        fetch,
      );

      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const client = cloudFormation.call(0).thisValue as CloudFormationClient;
      expect(await client.config.region()).toBe('ap-south-1');
      expect(client.config.profile).toBe('ops');
      // The profile's keys sign, not the environment's; the API's region comes from its URL.
      expect(seen[0]).toMatch(/Credential=AKIDPROFILE\/\d{8}\/eu-west-1\/execute-api\//);
    } finally {
      vi.unstubAllEnvs();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('--region and --profile without --stack are refused before any request', async () => {
    for (const flag of ['--region', '--profile']) {
      const r = await run([flag, 'x', 'status'], async () => {
        throw new Error('this test expects no request');
      });
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(
        'pipeline: --region and --profile go with --stack <name>\nRun `pipeline status --help` for usage.\n',
      );
    }
  });
});
