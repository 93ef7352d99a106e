// The MUX flow table is the shared one (shared/flow-table.ts), which the host agent's flow table also uses.
export { FlowTable, type FlowLimit } from '../shared/flow-table.js';
