import { seededGenerator } from "/work/wt/i11-ux/packages/replay-engine/src/workload.ts";
import { xoroshiro128plusFromState } from "pure-rand/generator/xoroshiro128plus";
const g = seededGenerator(0) as any;
console.log(g.getState().map((x:number)=>(x>>>0).toString(16)));
