// @ts-check
// Another OS user of the machine trying every door of a running local pipeline
// (test/e2e/owner-only.test.ts runs it as `nobody`). Plain JavaScript, run with `node` alone:
// it must need nothing the other user cannot read. Prints one JSON document of what each door
// answered; it asserts nothing itself.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import pg from 'pg';

/** @type {{ pgPort: number, bus: string, dynamo: string, http: string, taskId: string, busName: string, source: string, credentialsFile: string }} */
const target = JSON.parse(process.argv[2] ?? '{}');

const forged = () =>
  JSON.stringify({
    specversion: '1.0',
    id: randomUUID(),
    source: target.source,
    type: 'content.approved',
    subject: target.taskId,
    time: new Date().toISOString(),
    datacontenttype: 'application/json',
    data: {
      taskId: target.taskId,
      version: 2,
      title: 'forged',
      assignee: null,
      reviewer: 'intruder',
      approvedAt: new Date().toISOString(),
    },
  });

/**
 * One plain HTTP request; resolves with its status and body.
 * @param {string} base @param {string} method @param {string} path
 * @param {Record<string, string>} headers @param {string | undefined} body
 * @returns {Promise<{ status: number, body: string }>}
 */
const http = (base, method, path, headers, body) =>
  new Promise((ok, fail) => {
    const url = new URL(path, base);
    const req = request(url, { method, headers }, (res) => {
      let text = '';
      res.on('data', (c) => {
        text += c;
      });
      res.on('end', () => ok({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', fail);
    req.end(body);
  });

/** @param {() => Promise<unknown>} attempt */
const outcome = (attempt) =>
  attempt().then(
    (value) => ({ succeeded: true, value }),
    (/** @type {any} */ err) => ({
      succeeded: false,
      error: err?.name,
      code: err?.code,
      message: String(err?.message ?? err),
    }),
  );

const stranger = {
  accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
};

const results = {
  uid: process.getuid?.(),
  credentialsFile: await outcome(async () => readFileSync(target.credentialsFile, 'utf8').length),
  postgres: await outcome(async () => {
    const client = new pg.Client({
      connectionString: `postgres://postgres:pipeline@127.0.0.1:${target.pgPort}/postgres`,
      connectionTimeoutMillis: 30_000,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      const copied = await client.query("COPY (SELECT 1) TO PROGRAM 'id'");
      return copied.rowCount;
    } finally {
      await client.end().catch(() => {});
    }
  }),
  busUnsigned: await outcome(() =>
    http(
      target.bus,
      'POST',
      '/',
      { 'content-type': 'application/x-amz-json-1.1', 'x-amz-target': 'AWSEvents.PutEvents' },
      JSON.stringify({
        Entries: [
          {
            Source: target.source,
            DetailType: 'content.approved',
            EventBusName: target.busName,
            Detail: forged(),
          },
        ],
      }),
    ),
  ),
  busWronglySigned: await outcome(async () => {
    const client = new EventBridgeClient({
      endpoint: target.bus,
      region: 'us-east-1',
      credentials: stranger,
      maxAttempts: 1,
    });
    try {
      return await client.send(
        new PutEventsCommand({
          Entries: [
            {
              Source: target.source,
              DetailType: 'content.approved',
              EventBusName: target.busName,
              Detail: forged(),
            },
          ],
        }),
      );
    } finally {
      client.destroy();
    }
  }),
  dynamoUnsigned: await outcome(() =>
    http(
      target.dynamo,
      'POST',
      '/',
      { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': 'DynamoDB_20120810.PutItem' },
      JSON.stringify({
        TableName: 'content-pipeline-content-index',
        Item: { taskId: { S: target.taskId }, title: { S: 'forged' } },
      }),
    ),
  ),
  dynamoWronglySigned: await outcome(async () => {
    const client = new DynamoDBClient({
      endpoint: target.dynamo,
      region: 'us-east-1',
      credentials: stranger,
      maxAttempts: 1,
    });
    try {
      return await client.send(
        new PutItemCommand({
          TableName: 'content-pipeline-content-index',
          Item: { taskId: { S: target.taskId }, title: { S: 'forged' } },
        }),
      );
    } finally {
      client.destroy();
    }
  }),
  approve: await outcome(() =>
    http(
      target.http,
      'POST',
      `/tasks/${target.taskId}/approve`,
      { 'content-type': 'application/json' },
      '{}',
    ),
  ),
  create: await outcome(() =>
    http(
      target.http,
      'POST',
      '/tasks',
      { 'content-type': 'application/json' },
      JSON.stringify({ title: 'planted', assignee: 'intruder' }),
    ),
  ),
  redrive: await outcome(() =>
    http(
      target.http,
      'POST',
      '/ops/inbox/notify/dead/redrive',
      { 'content-type': 'application/json' },
      '{"all":true}',
    ),
  ),
  read: await outcome(() => http(target.http, 'GET', '/ops/status', {}, undefined)),
};

process.stdout.write(`${JSON.stringify(results)}\n`);
