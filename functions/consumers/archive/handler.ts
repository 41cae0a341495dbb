import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { createSqlClient, parseConfig } from '../../../shared/config';
import { createConsumerHandler } from '../../../shared/consumers/consumer';
import { consumerDeps, parseConsumerConfig } from '../../../shared/consumers/consumer-deps';
import { archiveEffect, S3SnapshotArchive } from '../../../shared/effects/archive';

// Module scope: a bad environment fails the cold start; clients and the database client are built once per container.
const config = parseConsumerConfig('archive');
const db = createSqlClient(parseConfig());

/** The archive consumer Lambda: stores a write-once S3 snapshot of each approved task version. */
export const handler = createConsumerHandler({
  ...consumerDeps('archive', config, new DynamoDBClient({})),
  effect: archiveEffect({
    archive: new S3SnapshotArchive(new S3Client({}), config.archiveBucket as string),
    db,
  }),
});
