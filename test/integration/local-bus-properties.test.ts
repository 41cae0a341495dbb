import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { FaultInjector, noFaults } from '../../infra/local/faults';
import { type BusEvent, LocalBus } from '../../infra/local/local-bus';
import type { ConsumerName } from '../../shared/topology';
import { anyCasing, anyJson, nastyString } from '../support/hostile-input';
import { type RawAnswer, rawBytes, rawHttp, sendPartially } from '../support/raw-http';
import { subscriberNames } from '../support/topology-expectations';

// Property-based tests of the local bus's PutEvents endpoint over raw HTTP (the relay reaches it
// through @aws-sdk/client-eventbridge; anything else on loopback may send anything). What AWS
// answers, per class of input:
// - A request EventBridge cannot read (not JSON, members of the wrong JSON type): 400 with
//   `__type` and `message` (awsJson 1.1 errors: https://smithy.io/2.0/aws/protocols/aws-json-1_1-protocol.html),
//   SerializationException, the awsJson framework's error for a body that does not deserialize.
// - Entries missing, empty or more than 10, or entries together over the size limit: 400
//   ValidationException (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html:
//   "Array Members: Minimum number of 1 item. Maximum number of 10 items", "the total entry size
//   must be less than 256KB").
// - A readable request: 200 with one result per entry, in order, each an `EventId` or an
//   `ErrorCode` and `ErrorMessage` (InvalidArgument, MalformedDetail, ...), and `FailedEntryCount`
//   (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEventsResultEntry.html).
// Never a 500: that is AWS's InternalFailure, a retryable fault, and bad input is not one.

// `PROPERTY_RUNS=5000` for a deeper hunt than the default run affords.
const numRuns = Number(process.env.PROPERTY_RUNS ?? 300);
const timeout = 60_000 + numRuns * 50;

/** The consumers that subscribe to approvals, sorted (as the deliveries are read). */
const approvedTargets: ConsumerName[] = subscriberNames(topology.eventTypes.approved).sort();

let bus: LocalBus;
let dir: string;
const delivered: { consumer: ConsumerName; event: BusEvent }[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'local-bus-properties-'));
  bus = new LocalBus({
    busName: topology.busName,
    rules: topology.rules,
    retry: () => ({ maxAttempts: 1, baseMs: 1, maxMs: 1, maxAgeMs: 60_000 }),
    maxRequestBytes: topology.relay.maxRequestBytes,
    faults: new FaultInjector(noFaults, 1),
    random: () => 0,
    dir,
    invoke: async (consumer, event) => {
      delivered.push({ consumer, event });
    },
  });
  await bus.start();
});
afterAll(async () => {
  await bus.stop(1_000);
  rmSync(dir, { recursive: true, force: true });
});

// --- what a PutEvents request can be --------------------------------------------------------

const detailText = fc.oneof(
  { arbitrary: fc.dictionary(nastyString, anyJson, { maxKeys: 4 }).map((d) => JSON.stringify(d)), weight: 6 },
  // JSON but not an object, or not JSON at all.
  { arbitrary: anyJson.map((v) => JSON.stringify(v)), weight: 1 },
  { arbitrary: nastyString, weight: 1 },
  // Deeply nested objects and arrays (AWS: "PutEvents will only process nested JSON up to 1000 levels deep").
  {
    arbitrary: fc
      .tuple(fc.integer({ min: 900, max: 40_000 }), fc.boolean())
      .map(([n, arrays]) =>
        arrays ? `{"a":${'['.repeat(n)}${']'.repeat(n)}}` : `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`,
      ),
    weight: 1,
  },
  // Either side of the 256 KiB request limit, in UTF-8 bytes.
  {
    arbitrary: fc
      .tuple(fc.integer({ min: 262_000, max: 262_200 }), fc.constantFrom('x', 'é'))
      .map(([n, unit]) => JSON.stringify({ p: unit.repeat(Math.floor(n / Buffer.byteLength(unit))) })),
    weight: 1,
  },
);

/** Each member of an entry, of its right JSON type. */
const entryMembers = {
  Source: fc.oneof(fc.constant(topology.source), nastyString),
  DetailType: fc.constantFrom(topology.eventTypes.approved, topology.eventTypes.withdrawn, '', 'Other'),
  Detail: detailText,
  EventBusName: fc.constantFrom(
    topology.busName,
    `arn:aws:events:us-east-1:000000000000:event-bus/${topology.busName}`,
    'default',
    '',
  ),
  // Epoch seconds; past ±8.64e12 no Date can hold it.
  Time: fc.oneof(
    { arbitrary: fc.integer({ min: 0, max: 4_102_444_800 }), weight: 12 },
    { arbitrary: fc.double({ noNaN: true, min: -1e12, max: 1e12 }), weight: 2 },
    { arbitrary: fc.constantFrom(1e20, -1e20, 8.64e12, 8.64e12 + 0.001, -8.64e12 - 0.001, 0.5), weight: 1 },
  ),
  Resources: fc.array(nastyString, { maxLength: 3 }),
  TraceHeader: nastyString,
};

/** The same members, each sometimes of a wrong JSON type. */
const illTypedMembers = Object.fromEntries(
  Object.entries(entryMembers).map(([name, right]) => [
    name,
    fc.oneof({ arbitrary: right as fc.Arbitrary<unknown>, weight: 3 }, { arbitrary: anyJson, weight: 1 }),
  ]),
);

/** An entry: usually with its required members, sometimes missing any of them. */
function entryOf(members: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<Record<string, unknown>> {
  return fc.oneof(
    { arbitrary: fc.record(members, { requiredKeys: ['Source', 'DetailType', 'Detail'] }), weight: 4 },
    { arbitrary: fc.record(members, { requiredKeys: [] }), weight: 1 },
  );
}

const entries = fc.oneof(
  { arbitrary: fc.array(entryOf(entryMembers), { minLength: 1, maxLength: 10 }), weight: 8 },
  {
    arbitrary: fc.array(fc.oneof(entryOf(entryMembers), entryOf(illTypedMembers), anyJson), {
      maxLength: 12,
    }),
    weight: 2,
  },
  { arbitrary: anyJson, weight: 1 },
);

/** The body: a PutEvents-shaped object, any JSON, garbage text or bytes, or nothing. */
const body = fc.oneof(
  {
    arbitrary: fc
      .record({ Entries: entries, EndpointId: nastyString, Extra: anyJson }, { requiredKeys: ['Entries'] })
      .map((b) => JSON.stringify(b)),
    weight: 10,
  },
  { arbitrary: fc.record({ EndpointId: nastyString }).map((b) => JSON.stringify(b)), weight: 1 },
  { arbitrary: anyJson.map((v) => JSON.stringify(v)), weight: 2 },
  { arbitrary: nastyString, weight: 1 },
  { arbitrary: fc.uint8Array({ maxLength: 64 }), weight: 1 },
  { arbitrary: fc.constantFrom('', 'null', '[]', '{', '{"Entries":', '\u0000'), weight: 1 },
);

const target = fc.oneof(
  { arbitrary: fc.constant('AWSEvents.PutEvents'), weight: 16 },
  {
    arbitrary: fc.oneof(
      anyCasing('awsevents.putevents'),
      fc.constantFrom(
        'AWSEvents.PutRule',
        'AWSEvents.PutEvent',
        'DynamoDB_20120810.PutItem',
        'PutEvents',
        '',
      ),
      fc.string({ unit: 'grapheme-ascii', maxLength: 20 }),
    ),
    weight: 1,
  },
  { arbitrary: fc.constant(undefined), weight: 1 },
);

const contentType = fc.oneof(
  { arbitrary: fc.constant('application/x-amz-json-1.1'), weight: 6 },
  {
    arbitrary: fc.constantFrom(
      'application/json',
      'text/plain',
      'application/x-amz-json-1.0',
      'application/cbor',
      '',
    ),
    weight: 1,
  },
  { arbitrary: fc.constant(undefined), weight: 1 },
);

const putEventsRequest = fc.record({
  method: fc.oneof(
    { arbitrary: fc.constant('POST'), weight: 20 },
    { arbitrary: fc.constantFrom('GET', 'PUT', 'DELETE'), weight: 1 },
  ),
  path: fc.oneof(
    { arbitrary: fc.constant('/'), weight: 20 },
    { arbitrary: fc.webPath().filter((p) => p.startsWith('/')), weight: 1 },
  ),
  target,
  contentType,
  body,
});

// --- what an AWS-shaped answer is ------------------------------------------------------------

/** What the request's `Entries` was, when it was a JSON array (the 200 then has one result per entry). */
function requestEntries(sent: string | Uint8Array): unknown[] | undefined {
  try {
    const parsed = JSON.parse(Buffer.from(sent).toString('utf8'));
    return Array.isArray(parsed?.Entries) ? parsed.Entries : undefined;
  } catch {
    return undefined;
  }
}

function expectAwsShaped(res: RawAnswer, sent: string | Uint8Array): void {
  const context = `${res.status} ${res.body.slice(0, 300)}`;
  expect(res.headers['content-type'], context).toBe('application/x-amz-json-1.1');
  const answer = JSON.parse(res.body);
  if (res.status === 200) {
    const results = requestEntries(sent);
    expect(answer, context).toEqual({ FailedEntryCount: expect.any(Number), Entries: expect.any(Array) });
    expect(answer.Entries, context).toHaveLength(results?.length ?? -1);
    for (const result of answer.Entries) {
      expect(result, context).toSatisfy(
        (r: Record<string, unknown>) =>
          (typeof r.EventId === 'string' && Object.keys(r).length === 1) ||
          (typeof r.ErrorCode === 'string' &&
            typeof r.ErrorMessage === 'string' &&
            Object.keys(r).length === 2),
      );
    }
    expect(answer.FailedEntryCount, context).toBe(
      answer.Entries.filter((r: object) => 'ErrorCode' in r).length,
    );
    return;
  }
  expect(res.status, context).toBeGreaterThanOrEqual(400);
  expect(res.status, context).toBeLessThan(500);
  expect(answer, context).toEqual({ __type: expect.any(String), message: expect.any(String) });
  expect(res.headers['x-amzn-errortype'], context).toBe(answer.__type);
}

async function send(
  req: typeof putEventsRequest extends fc.Arbitrary<infer T> ? T : never,
): Promise<RawAnswer> {
  const headers: [string, string][] = [];
  if (req.target !== undefined) headers.push(['X-Amz-Target', req.target]);
  if (req.contentType !== undefined) headers.push(['Content-Type', req.contentType]);
  return rawHttp(bus.endpoint, { method: req.method, target: req.path, headers, body: req.body });
}

/** A PutEvents through the AWS SDK, as the relay sends it; resolves once every target has the event. */
async function expectStillDelivers(): Promise<void> {
  const client = new EventBridgeClient({
    endpoint: bus.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
  });
  try {
    const res = await client.send(
      new PutEventsCommand({
        Entries: [
          {
            EventBusName: topology.busName,
            Source: topology.source,
            DetailType: topology.eventTypes.approved,
            Detail: JSON.stringify({ check: 'still alive' }),
          },
        ],
      }),
    );
    const id = res.Entries?.[0]?.EventId;
    expect(res.FailedEntryCount).toBe(0);
    await bus.idle();
    expect(
      delivered
        .filter((d) => d.event.id === id)
        .map((d) => d.consumer)
        .sort(),
    ).toEqual(approvedTargets);
  } finally {
    client.destroy();
  }
}

describe('local bus PutEvents under random requests', () => {
  it(
    'answers every request with an AWS-shaped error or per-entry results, never a 500, and still delivers afterwards',
    async () => {
      await fc.assert(
        fc.asyncProperty(putEventsRequest, async (req) => {
          expectAwsShaped(await send(req), req.body);
        }),
        { numRuns },
      );
      await expectStillDelivers();
    },
    timeout,
  );

  it('survives bytes that are not HTTP, answering a 4xx or closing, and still delivers afterwards', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ minLength: 1, maxLength: 200 }),
          fc
            .string({ unit: 'binary-ascii', minLength: 1, maxLength: 200 })
            .map((s) => new TextEncoder().encode(s)),
          fc
            .constantFrom(
              'POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n',
              'GET /\r\n\r\n',
              'POST / HTTP/9.9\r\n\r\n',
            )
            .map((s) => new TextEncoder().encode(s)),
        ),
        async (bytes) => {
          const status = await rawBytes(bus.endpoint, bytes);
          expect(status === 0 || (status >= 400 && status < 500), `status ${status}`).toBe(true);
        },
      ),
      { numRuns: Math.ceil(numRuns / 3) },
    );
    await expectStillDelivers();
  });
});

describe('what the local bus answers each class of bad request, as EventBridge does', () => {
  const put = (body: string) =>
    rawHttp(bus.endpoint, {
      method: 'POST',
      target: '/',
      headers: [
        ['X-Amz-Target', 'AWSEvents.PutEvents'],
        ['Content-Type', 'application/x-amz-json-1.1'],
      ],
      body,
    });
  const valid = { Source: topology.source, DetailType: topology.eventTypes.approved, Detail: '{"a":1}' };
  const request = (...list: unknown[]) => JSON.stringify({ Entries: list });
  const nested = (depth: number) => `${'{"a":'.repeat(depth - 1)}{}${'}'.repeat(depth - 1)}`;

  // A body that does not deserialize into PutEventsRequest is refused whole; AWS JSON services
  // answer a member of the wrong JSON type with a 400 SerializationException
  // (https://smithy.io/2.0/aws/protocols/aws-json-1_1-protocol.html).
  it.each([
    ['a JSON null', 'null'],
    ['a JSON array', '[]'],
    ['Entries that is not a list', '{"Entries":"x"}'],
    ['an entry that is null', request(null)],
    ['an entry that is not an object', request(7)],
    ['a Source that is not a string', request({ ...valid, Source: 5 })],
    ['a Detail that is an object, not JSON text', request({ ...valid, Detail: { a: 1 } })],
    ['Resources that are not strings', request({ ...valid, Resources: [1] })],
    ['a Time that is not epoch seconds', request({ ...valid, Time: '2026-12-01T00:00:00Z' })],
    ['a Time no date can hold', request({ ...valid, Time: 1e20 })],
  ])('answers %s with a 400 SerializationException', async (_, body) => {
    const res = await put(body);

    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toEqual({ __type: 'SerializationException', message: expect.any(String) });
  });

  // https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html: Entries is
  // required, 1 to 10 items, and the entries together must fit the size limit.
  it.each([
    ['no Entries', '{}', /Member must not be null/],
    ['empty Entries', request(), /greater than or equal to 1/],
    ['11 entries', request(...Array.from({ length: 11 }, () => valid)), /less than or equal to 10/],
    [
      'an entry over 256 KiB',
      request({ ...valid, Detail: JSON.stringify({ p: 'x'.repeat(256 * 1024) }) }),
      /^Total size of the entries in the request is over the limit\.$/,
    ],
  ])('answers %s with a 400 ValidationException', async (_, body, message) => {
    const res = await put(body);

    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toEqual({
      __type: 'ValidationException',
      message: expect.stringMatching(message),
    });
  });

  it('answers a Detail nested deeper than 1,000 levels as MalformedDetail per entry, and accepts 1,000', async () => {
    const res = await put(
      request(
        { ...valid, Detail: nested(1000) },
        { ...valid, Detail: nested(1001) },
        { ...valid, Detail: nested(20_000) },
      ),
    );

    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({
      FailedEntryCount: 2,
      Entries: [
        { EventId: expect.any(String) },
        { ErrorCode: 'MalformedDetail', ErrorMessage: 'Detail is malformed.' },
        { ErrorCode: 'MalformedDetail', ErrorMessage: 'Detail is malformed.' },
      ],
    });
  });

  it('reads a null member as an absent one, as awsJson does: a null Source is InvalidArgument', async () => {
    const res = await put(request({ ...valid, Source: null }, { ...valid, Time: null, Resources: null }));

    expect(JSON.parse(res.body)).toEqual({
      FailedEntryCount: 1,
      Entries: [
        {
          ErrorCode: 'InvalidArgument',
          ErrorMessage: 'Parameter Source is not valid. Reason: Source is a required argument.',
        },
        { EventId: expect.any(String) },
      ],
    });
  });
});

describe('a PutEvents body over the limit', () => {
  it('is refused while it arrives: a declared 64 MB body is answered after 1 KB of it, and the bus goes on', async () => {
    const port = Number(new URL(bus.endpoint).port);
    const answer = await sendPartially(
      port,
      [
        'POST / HTTP/1.1',
        `Host: 127.0.0.1:${port}`,
        'Content-Type: application/x-amz-json-1.1',
        'X-Amz-Target: AWSEvents.PutEvents',
        `Content-Length: ${64 * 1024 * 1024}`,
      ],
      Buffer.alloc(1024, 0x20),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({
      __type: 'RequestEntityTooLarge',
    });
  });
});
