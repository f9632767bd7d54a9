//! The agent's messages as the daemon reads them beside libccp: the header, and the
//! control registers of an update, taken by the agent-datapath contract
//! (ccp_algs/contract.py, generated into src/contract.rs).

use crate::bpf::Ctl;
use crate::contract;

pub const MSG_CREATE: u16 = 0;
pub const MSG_MEASURE: u16 = 1;

/// (type, socket id) from a CCP message header: u16 type, u16 length, u32 socket id.
pub fn msg_header(msg: &[u8]) -> Option<(u16, u32)> {
    if msg.len() < 8 {
        return None;
    }
    Some((u16::from_ne_bytes([msg[0], msg[1]]), u32::from_ne_bytes([msg[4], msg[5], msg[6], msg[7]])))
}

pub const MSG_INSTALL_EXPR: u16 = 2;
pub const MSG_UPDATE_FIELDS: u16 = 3;
pub const MSG_CHANGE_PROG: u16 = 4;

/// Control registers an intcc algorithm declares first, in the contract's order
/// (ccp_algs/contract.py; libccp keeps no names: portus numbers control registers in
/// declaration order). The kernel's per-ACK growth and its ssthresh take them from the
/// agent's updates once the agent's contract_version register has matched ours: a
/// program whose first registers mean something else, or an agent of another version,
/// never steers the kernel by chance (a mismatch is counted and logged).
pub const REG_NONVOLATILE_CONTROL: u8 = 0;
pub const REG_VOLATILE_CONTROL: u8 = 8;
const UPDATE_FIELD_LEN: usize = 13; // u8 type, u32 index, u64 value, packed

/// The (control register, value) pairs of an UpdateFields or ChangeProg message.
pub fn control_updates(kind: u16, msg: &[u8]) -> Vec<(u32, u32)> {
    // UpdateFieldsMsg: header, u32 count; ChangeProgMsg: header, u32 program uid, u32 count
    let count_at = if kind == MSG_UPDATE_FIELDS { 8 } else { 12 };
    let Some(count) = msg.get(count_at..count_at + 4) else { return Vec::new() };
    let count = u32::from_ne_bytes([count[0], count[1], count[2], count[3]]) as usize;
    let mut updates = Vec::with_capacity(count.min(64));
    for i in 0..count.min(64) {
        let at = count_at + 4 + i * UPDATE_FIELD_LEN;
        let Some(f) = msg.get(at..at + UPDATE_FIELD_LEN) else { break };
        if f[0] != REG_NONVOLATILE_CONTROL && f[0] != REG_VOLATILE_CONTROL {
            continue;
        }
        let index = u32::from_ne_bytes([f[1], f[2], f[3], f[4]]);
        let value = u64::from_ne_bytes([f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12]]);
        updates.push((index, value.min(u32::MAX as u64) as u32));
    }
    updates
}

/// Apply the contract's registers in an agent message to a flow's control entry;
/// `accepted`: the flow's agent has announced our contract version. Err: it announced
/// another one.
pub fn take_contract_registers(accepted: &mut bool, ctl: &mut Ctl, updates: &[(u32, u32)]) -> Result<(), u32> {
    if let Some(&(_, version)) = updates.iter().find(|&&(i, _)| i == contract::REG_CONTRACT_VERSION) {
        *accepted = version == contract::CONTRACT_VERSION;
        if !*accepted {
            return Err(version);
        }
    }
    if *accepted {
        for &(index, value) in updates {
            contract::set_ctl_register(ctl, index, value);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update_fields_msg(fields: &[(u8, u32, u64)]) -> Vec<u8> {
        let mut m = vec![0u8; 8];
        m[0..2].copy_from_slice(&MSG_UPDATE_FIELDS.to_ne_bytes());
        m.extend_from_slice(&(fields.len() as u32).to_ne_bytes());
        for &(kind, index, value) in fields {
            m.push(kind);
            m.extend_from_slice(&index.to_ne_bytes());
            m.extend_from_slice(&value.to_ne_bytes());
        }
        m
    }

    #[test]
    fn registers_count_only_after_the_agent_announced_our_contract() {
        let ss = contract::REG_SS_UNTIL;
        let beta = contract::REG_LOSS_BETA;
        let (mut accepted, mut ctl) = (false, Ctl::default());
        // no version announced: nothing steers the kernel
        let m = update_fields_msg(&[(REG_NONVOLATILE_CONTROL, ss, 30000)]);
        assert_eq!(take_contract_registers(&mut accepted, &mut ctl, &control_updates(MSG_UPDATE_FIELDS, &m)), Ok(()));
        assert_eq!(ctl.ss_until_bytes, 0);
        // another version: refused and named
        let v = contract::REG_CONTRACT_VERSION;
        let m = update_fields_msg(&[(0, v, 1), (0, ss, 30000), (0, beta, 717)]);
        assert_eq!(take_contract_registers(&mut accepted, &mut ctl, &control_updates(MSG_UPDATE_FIELDS, &m)), Err(1));
        assert_eq!((ctl.ss_until_bytes, ctl.loss_beta_1024), (0, 0));
        // ours: taken, by position, and later updates without the version too
        let m = update_fields_msg(&[(0, v, contract::CONTRACT_VERSION as u64), (0, ss, 30000), (0, beta, 717)]);
        assert_eq!(take_contract_registers(&mut accepted, &mut ctl, &control_updates(MSG_UPDATE_FIELDS, &m)), Ok(()));
        assert_eq!((ctl.ss_until_bytes, ctl.loss_beta_1024), (30000, 717));
        let m = update_fields_msg(&[(REG_VOLATILE_CONTROL, ss, 0), (4 /* a report register */, ss, 9)]);
        take_contract_registers(&mut accepted, &mut ctl, &control_updates(MSG_UPDATE_FIELDS, &m)).unwrap();
        assert_eq!(ctl.ss_until_bytes, 0);
    }

    #[test]
    fn a_truncated_message_yields_the_whole_fields_only() {
        let m = update_fields_msg(&[(0, 3, 7), (0, 4, 8)]);
        assert_eq!(control_updates(MSG_UPDATE_FIELDS, &m[..m.len() - 1]), vec![(3, 7)]);
        assert!(control_updates(MSG_UPDATE_FIELDS, &m[..6]).is_empty());
    }
}
