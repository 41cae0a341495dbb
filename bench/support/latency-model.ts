/**
 * The latency model of the pipeline on AWS: one distribution per hop, each with the published
 * figure it comes from, applied by bench/support/latency-seams.ts at the place the hop happens
 * in the local runtime (a Data API call where a SQL call is made, a DynamoDB call where the
 * SDK sends one, EventBridge's delivery where the bus delivers, ...). Every distribution is
 * given by quantile points, linear in between; a point no source gives is marked as our
 * assumption. Sources were read on 2026-12-01.
 *
 * Where a source measured more than the hop (a whole Lambda invocation, publish to consumer),
 * the model says what was taken away and how, so that no hop is counted twice.
 */

/** A latency distribution: `[fraction, ms]` points, fractions ascending from 0 to 1. */
export interface LatencyDistribution {
  readonly points: readonly (readonly [number, number])[];
  /** Where the figures come from: URL, date, what was measured, and per call or per invocation. */
  readonly source: string;
}

/** Every hop the model delays, by the seam that applies it. */
export interface LatencyModel {
  /** API Gateway (REST, Regional) overhead on one request: `Latency` minus `IntegrationLatency`. Half before the integration, half after. */
  readonly apiGateway: LatencyDistribution;
  /** A warm synchronous Lambda invoke: `IntegrationLatency` minus the function's `Duration`. */
  readonly lambdaInvoke: LatencyDistribution;
  /** A new execution environment's start (Node 22, a bundle of our size), before the handler runs. */
  readonly coldStart: LatencyDistribution;
  /** Lambda's asynchronous invoke queue: from `Invoke` (Event) accepted to the function running. */
  readonly asyncQueue: LatencyDistribution;
  /** One RDS Data API call (ExecuteStatement, BeginTransaction, CommitTransaction, RollbackTransaction). */
  readonly dataApiCall: LatencyDistribution;
  /** One EventBridge PutEvents call (up to 10 entries). */
  readonly putEvents: LatencyDistribution;
  /** EventBridge rule delivery to a Lambda target: from the bus holding the event to the target running. */
  readonly eventDelivery: LatencyDistribution;
  /**
   * A consumer's queue: from EventBridge's delivery to the queue to the consumer's function
   * running (SQS, the event source mapping's poll, the invoke).
   */
  readonly queueHop: LatencyDistribution;
  /** One DynamoDB call (GetItem, PutItem, UpdateItem, Query) on a kept-alive connection. */
  readonly dynamoDbCall: LatencyDistribution;
  /** One S3 PutObject of a small object (a write-once object of a consumer's bucket). */
  readonly s3Put: LatencyDistribution;
  /** One SNS Publish. */
  readonly snsPublish: LatencyDistribution;
  /** One Lambda `Invoke` API call with InvocationType Event (the relay nudge the tasks API waits for). */
  readonly lambdaInvokeApi: LatencyDistribution;
}

export type Hop = keyof LatencyModel;

/** The value of `distribution` at `fraction` (linear between its points). */
export function quantile(distribution: LatencyDistribution, fraction: number): number {
  const points = distribution.points;
  for (let i = 1; i < points.length; i++) {
    const [f1, ms1] = points[i] as readonly [number, number];
    if (fraction <= f1) {
      const [f0, ms0] = points[i - 1] as readonly [number, number];
      return ms0 + ((fraction - f0) / (f1 - f0 || 1)) * (ms1 - ms0);
    }
  }
  return (points[points.length - 1] as readonly [number, number])[1];
}

/** Draws from `distribution` by inverting its quantile points with `random` (uniform in [0, 1)). */
export function sampler(distribution: LatencyDistribution, random: () => number): () => number {
  return () => quantile(distribution, random());
}

/**
 * `whole` minus `part` fraction by fraction (each of `whole`'s points less `part` at the same
 * fraction, times `share`): how a hop is cut out of a measurement that also covered another
 * hop. A difference of quantiles is not the quantile of the difference; it is exact when the
 * two move together and an approximation otherwise, which each use says.
 */
export function minus(
  whole: LatencyDistribution['points'],
  part: LatencyDistribution,
  share = 1,
): (readonly [number, number])[] {
  return whole.map(([f, ms]) => [f, Math.max(0, round1(ms - share * quantile(part, f)))] as const);
}

const round1 = (v: number) => Math.round(v * 10) / 10;

/** Kazulkin's warm Data API invocations (Lambda Duration, Java 21, 1,024 MB), ms at each fraction. */
const dataApiInvocation = [
  [0.5, 104.68],
  [0.75, 173.96],
  [0.9, 271.32],
  [0.99, 572.11],
  [0.999, 1482.89],
] as const;

/** The same author's warm floor: a Java 21 Lambda answering an API Gateway event with one DynamoDB GetItem. */
const javaWarmFloor: LatencyDistribution = {
  points: [
    [0, 0],
    [0.5, 6.21],
    [0.75, 14.1],
    [0.9, 21.23],
    [0.99, 63.93],
    [0.999, 159.38],
    [1, 159.38],
  ],
  source: 'see dataApiCall',
};

const putEvents: LatencyDistribution = {
  points: [
    [0, 10], // assumption
    [0.5, 30], // assumption
    [0.9, 80], // the Amazon Key p90 of publish -> subscriber, taken for the call alone (an upper bound)
    [0.99, 200], // assumption: 2.5 x p90
    [1, 400], // assumption
  ],
  source:
    'No per-call figure is published: AWS added a PutEventsLatency metric ("Enhanced Amazon CloudWatch metrics for ' +
    'Amazon EventBridge", https://aws.amazon.com/blogs/compute/enhanced-amazon-cloudwatch-metrics-for-amazon-eventbridge/) ' +
    'without figures. Bounded above by the end-to-end figures below: the AWS Architecture Blog, "Mastering millisecond ' +
    'latency and millions of events: the event-driven architecture behind the Amazon Key Suite" (2026-02-04, summarized at ' +
    'https://sysdesign-wiki.pages.dev/sources/2026-02-04-aws-amazon-key-eventbridge-event-driven-architecture/): 80 ms p90 ' +
    'from publish to subscriber at 2,000 events/s over 14 million subscriber calls, taken as the call p90; p50, p99 and the ' +
    'extremes are our assumptions. Per call (up to 10 entries).',
};

/** Publish -> consumer running, EventBridge after its February 2023 upgrade (Bite-Sized Serverless). */
const publishToConsumer = [
  [0.1, 113],
  [0.5, 148],
  [0.9, 241],
  [0.99, 387],
] as const;

/** Step Functions Express invoking a Lambda function asynchronously and synchronously (same source). */
const express = {
  async: [
    [0.1, 96.5],
    [0.5, 118],
    [0.9, 178],
    [0.99, 298],
  ],
  sync: [
    [0.1, 57.5],
    [0.5, 77.3],
    [0.9, 129],
    [0.99, 241],
  ],
} as const;

const bitesized =
  'Luc van Donkersgoed, "Serverless Messaging: Latency Compared" (Bite-Sized Serverless, ' +
  'https://bitesizedserverless.com/bite/serverless-messaging-latency-compared/; tests of 2022-09-04/05 in eu-west-1, ' +
  'EventBridge re-run after its upgrade of 2023-02-17): a producer Lambda function stamps a message and publishes it ' +
  '1,024 times; the consumer Lambda function on the other side takes the difference';

/** An AWS API call from Lambda over a kept-alive HTTPS connection, where the service publishes no per-call figure of its own. */
const awsApiCall: LatencyDistribution['points'] = [
  [0, 3], // assumption
  [0.5, 8], // assumption: under the measured mean, as in any right-skewed latency
  [0.9, 15], // assumption
  [0.99, 40], // assumption
  [1, 150], // assumption
];

const dynamoSource =
  'Yan Cui, "Lambda optimization tip - enable HTTP keep-alive" (2018, https://hackernoon.com/lambda-optimization-tip-enable-http-keep-alive-6dc503f6f114): ' +
  'a Node.js Lambda function behind API Gateway putting one item; with keep-alive the DynamoDB operation averaged about ' +
  '10 ms (33 ms without), timed around the call; and AWS re:Post, "How can I troubleshoot high latency on an Amazon ' +
  'DynamoDB table?" (https://repost.aws/knowledge-center/dynamodb-high-latency): "For most atomic operations, such as ' +
  'GetItem and PutItem, an average latency is in single-digit milliseconds" (service side). Only the mean is published: ' +
  'every point is our assumption, chosen so the mean is about 10.8 ms';

/** The model, hop by hop. */
export const latencyModel: LatencyModel = {
  apiGateway: {
    points: [
      [0, 10], // the source's low end
      [0.5, 20], // assumption: the middle of the source's range
      [0.9, 30], // the source's high end, taken as p90
      [0.99, 60], // assumption: 2 x p90
      [1, 120], // assumption
    ],
    source:
      'AWS defines Latency as IntegrationLatency plus "other API Gateway overhead" ' +
      '(https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-metrics-and-dimensions.html) but publishes ' +
      'no figure for the overhead; smplogs, "High API Response Latency" (https://www.smplogs.com/patterns/apigateway/high-latency): ' +
      '"API Gateway itself typically adds only 10-30 milliseconds of overhead for REST APIs". A weak source (no method ' +
      'given): the range is mapped to min..p90, the rest is our assumption. Per request.',
  },
  lambdaInvoke: {
    points: [
      [0, 1], // the source's low end
      [0.5, 2], // the source's high end, taken as the median
      [0.9, 5], // assumption
      [0.99, 15], // assumption
      [1, 50], // assumption
    ],
    source:
      'M. Arck, "Review Lambda latency" (https://imarck.dev/blog/art_1_lambda_latency): in a warm start "the code can start ' +
      'running within milliseconds, typically around ~1-2 ms". A weak source (no measurement given); AWS publishes none. ' +
      'Per synchronous invocation of a warm environment (the tasks API behind API Gateway); asynchronous invocations carry ' +
      'theirs in asyncQueue and eventDelivery.',
  },
  coldStart: {
    points: [
      [0, 346], // 375 less the runtime's spread below its median (130.4 - 101.6)
      [0.5, 375],
      [1, 425], // 375 plus the runtime's spread above its median (180.3 - 130.4)
    ],
    source:
      'The Init Duration of a Node 22 function bundled with esbuild and three AWS SDK v3 clients: "around ~375 ms. ~250 ms ' +
      'to load my application code with 3 AWS clients and an additional 125 ms to make the first https request to ' +
      'DynamoDB" ("The Fastest Node 22 Lambda Coldstart Configuration", 2025-07-21, ' +
      'https://speedrun.nobackspacecrew.com/blog/2025/07/21/the-fastest-node-22-lambda-coldstart-configuration.html); our ' +
      "bundles are 441-657 KiB of minified ESM with one to three SDK clients (docs/aws.md). The spread is the runtime's: " +
      'maxday/lambda-perf (https://github.com/maxday/lambda-perf, data/last.json generated 2026-08-22), ten cold starts of ' +
      'a hello-world nodejs22.x zip on arm64 at 512 MB: Init Duration 101.6 to 180.3 ms, median 130.4. Per new execution ' +
      'environment (the first HTTPS connection included), charged when no idle one is left.',
  },
  asyncQueue: {
    points: [
      [0, 30], // assumption
      ...express.async.map(
        ([f, ms], i) => [f, round1(ms - (express.sync[i] as readonly [number, number])[1])] as const,
      ),
      [1, 150], // assumption
    ],
    source:
      `${bitesized}. The same Step Functions Express workflow invoking the consumer asynchronously (p10/p50/p90/p99 96.5/118/` +
      '178/298 ms) and synchronously (57.5/77.3/129/241 ms): the difference, fraction by fraction, is taken as the queue ' +
      'between Invoke (Event) accepted and the function running (a difference of quantiles, an approximation). Per ' +
      'asynchronous invocation (the relay nudge).',
  },
  dataApiCall: {
    points: [
      [0, 40], // assumption: a floor of 40 ms
      ...minus(dataApiInvocation, javaWarmFloor),
      [1, round1(2179.7 - 159.38)], // the measured max less the floor's p99.9
    ],
    source:
      'No per-call figure is published; the whole-invocation one less a measured warm Lambda floor. Invocation: Vadym ' +
      'Kazulkin, "Data API for Amazon Aurora Serverless v2 with AWS SDK for Java - Part 5: Basic cold and warm starts ' +
      'measurements" (2024-04-08, https://dev.to/aws-builders/data-api-for-amazon-aurora-serverless-v2-with-aws-sdk-for-java-part-5-basic-cold-and-warm-starts-measurements-4gi9): ' +
      'about 10,000 warm invocations (Lambda Duration) of a Java 21 function at 1,024 MB whose work is one ExecuteStatement by ' +
      'primary key on Aurora Serverless v2 PostgreSQL: p50 104.68, p75 173.96, p90 271.32, p99 572.11, p99.9 1,482.89, max ' +
      '2,179.7 ms. Floor: the same author\'s "AWS SnapStart - Part 28 Measuring cold and warm starts with Java 21, ' +
      'APIGatewayProxyRequestEvent priming and memory settings" (copy at https://newsworldstream.com/aws-snapstart-part-28-measuring-cold-and-warm-starts-with-java-21-apigatewayproxyrequestevent-priming-and-memory-settings): ' +
      'warm Duration of a Java 21 function at 256 MB answering an API Gateway event with one DynamoDB GetItem: p50 6.21, p75 ' +
      '14.10, p90 21.23, p99 63.93, p99.9 159.38 ms. Subtracted fraction by fraction; the floor includes a GetItem and ran ' +
      'at a quarter of the memory, so the per-call figure leans low, most at the tail. The 40 ms floor is our assumption. Per call.',
  },
  putEvents,
  eventDelivery: {
    points: [
      [0, 80], // assumption
      ...minus(publishToConsumer, putEvents, 0.5),
      [1, 600], // assumption
    ],
    source:
      `${bitesized}; EventBridge after its upgrade, "Push - Async Lambda invocation": p10 113, p50 148, p90 241, p99 387 ms ` +
      "from before PutEvents to the consumer running (rule matching, delivery and Lambda's asynchronous queue included). " +
      'The bus here holds the event once half the PutEvents call has passed, so half of putEvents is taken away, fraction ' +
      'by fraction (an approximation). A newer end-to-end figure is lower (80 ms p90, Amazon Key, see putEvents): this one ' +
      'leans slow. The extremes are our assumptions. Per event and target.',
  },
  queueHop: {
    points: [
      [0, 8], // assumption
      [0.1, 13.7],
      [0.5, 16.2],
      [0.9, 33.8],
      [0.99, 105],
      [1, 1000], // assumption: a poller's long poll returning late
    ],
    source:
      `${bitesized}; "SQS Standard", Pull - Lambda Event Source Mapping: p10 13.7, p50 16.2, p90 33.8, p99 105 ms from ` +
      'before SendMessage to the consumer running. Added after eventDelivery, which is kept whole: its asynchronous ' +
      "Lambda queue stands for EventBridge's delivery to the queue (an assumption that leans slow). The extremes are our " +
      'assumptions. Per event and consumer.',
  },
  dynamoDbCall: {
    points: awsApiCall,
    source: `${dynamoSource}. Per call.`,
  },
  s3Put: {
    points: [
      [0, 10], // assumption
      [0.5, 30], // "tens of milliseconds": 30 is our pick
      [0.9, 60], // assumption
      [0.99, 150], // assumption
      [0.999, 500], // assumption
      [1, 2000], // the source's point to retry a small PUT
    ],
    source:
      'AWS, "Best Practices Design Patterns: Optimizing Amazon S3 Performance", Timeouts and Retries for Latency-Sensitive ' +
      'Applications (https://docs.aws.amazon.com/whitepapers/latest/s3-optimizing-performance-best-practices/timeouts-and-retries-for-latency-sensitive-applications.html): ' +
      'for requests under 512 KB "median latencies are often in the tens of milliseconds range", and a GET or PUT is worth ' +
      "retrying after 2 seconds. Only the median's range and the 2 s point are published. Per call (PutObject).",
  },
  snsPublish: {
    points: awsApiCall,
    source:
      'No per-call figure is published. Bounded above by Publish -> subscribed Lambda function running, SNS Standard: p10 ' +
      `62, p50 73, p90 125, p99 225 ms (${bitesized}). Modeled as one AWS API call on a kept-alive connection, the ` +
      `DynamoDB figure: ${dynamoSource}. Per call.`,
  },
  lambdaInvokeApi: {
    points: awsApiCall,
    source:
      'No per-call figure is published for Invoke with InvocationType Event (the call returns once Lambda queued the ' +
      `event). Modeled as one AWS API call on a kept-alive connection, the DynamoDB figure: ${dynamoSource}. Per call.`,
  },
};

/**
 * The goals the model is held to, from its own figures: the approve API's p99 within one Data
 * API call's p99 plus API Gateway's and Lambda's overhead on the caller's path (the synchronous
 * invoke, and the Invoke call that queues the relay nudge); request -> all three effects p99
 * under 1.5 s at 100 approvals/s.
 */
export function latencyGoals(model: LatencyModel = latencyModel) {
  const p99 = (hop: Hop) => quantile(model[hop], 0.99);
  return {
    approveP99BoundMs: Math.round(
      p99('dataApiCall') + p99('apiGateway') + p99('lambdaInvoke') + p99('lambdaInvokeApi'),
    ),
    effectsP99At100BoundMs: 1_500,
  };
}

/**
 * Lambda's execution environments of one function: an invocation takes an idle one, or a new
 * one (a cold start) when none is idle, so new environments appear only while concurrency grows
 * past what it has been. Idle environments are kept for the run (Lambda keeps them for minutes).
 */
export class ContainerPool {
  private idle = 0;
  private busy = 0;
  /** Environments created: the cold starts. */
  created = 0;
  /** The most invocations in flight at once. */
  peak = 0;

  /** Takes an environment for one invocation; `cold` when a new one had to start. */
  acquire(): { readonly cold: boolean } {
    this.busy++;
    this.peak = Math.max(this.peak, this.busy);
    if (this.idle > 0) {
      this.idle--;
      return { cold: false };
    }
    this.created++;
    return { cold: true };
  }

  /** Gives an environment back when its invocation ends. */
  release(): void {
    this.busy--;
    this.idle++;
  }
}

/**
 * Environments a steady `perSecond` of invocations of `durationMs` each needs: the concurrency
 * by Little's law (rate x duration), rounded up, since a fraction of one is a whole one.
 */
export function containersFor(perSecond: number, durationMs: number): number {
  return Math.ceil((perSecond * durationMs) / 1_000 - 1e-9);
}
