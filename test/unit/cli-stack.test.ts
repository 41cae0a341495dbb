import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { CloudWatchClient, DescribeAlarmsCommand, SetAlarmStateCommand } from '@aws-sdk/client-cloudwatch';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { runCli } from '../../infra/local/cli';
import type { FetchLike } from '../../infra/local/cli-client';

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

async function run(argv: string[], fetch: FetchLike = async () => new Response('{}')) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    fetch,
    env: credentials,
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
    expect(both.stderr).toContain('--stack and --url exclude each other');
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
});
