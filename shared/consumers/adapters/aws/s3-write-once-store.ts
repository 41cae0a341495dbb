import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { sdkClientConfig } from '../../../aws/sdk-client';
import type { PutOutcome, WriteOnceStore } from '../../resources';

const isPreconditionFailed = (err: unknown) => {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } } | null;
  return e?.name === 'PreconditionFailed' || e?.$metadata?.httpStatusCode === 412;
};

/**
 * A bucket resource on S3: PutObject with `If-None-Match: *`, so S3 itself refuses a second
 * write to a key (412 Precondition Failed).
 * https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html
 */
export class S3WriteOnceStore implements WriteOnceStore {
  constructor(
    private readonly s3: S3Client,
    private readonly bucket: string,
  ) {}

  async put(key: string, body: string): Promise<PutOutcome> {
    try {
      await this.s3.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: body,
          ContentType: 'application/json',
          IfNoneMatch: '*',
        }),
      );
      return 'written';
    } catch (err) {
      if (isPreconditionFailed(err)) return 'exists';
      // ConditionalRequestConflict (409): a concurrent write to the key is in flight; retrying decides.
      throw new Error(`put of s3://${this.bucket}/${key} failed`, { cause: err });
    }
  }
}

/** A bucket resource's adapter for `lambdaConsumer`. */
export const s3Bucket = (bucketName: string): S3WriteOnceStore =>
  new S3WriteOnceStore(new S3Client(sdkClientConfig()), bucketName);
