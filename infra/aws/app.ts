import { topology } from '../../functions/topology';
import { createPipelineApp } from './pipeline-app';

// cdk.json runs this file: `npx cdk synth|deploy -c stage=sandbox -c alarmEmail=...`.
createPipelineApp(topology).app.synth();
