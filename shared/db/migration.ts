/**
 * A versioned schema change. Migrations are TypeScript modules rather than `.sql` files so
 * that esbuild bundles them into the migrate custom resource with no asset copying, and the
 * local runtime imports the very same objects. One statement per entry: the Data API runs
 * one statement per call.
 *
 * Its own module, apart from the list in `migrations/index.ts`: a migration imports this type
 * and the list imports every migration, so the type beside the list would close a loop.
 */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly statements: readonly string[];
}
